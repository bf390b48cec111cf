//! Reading the store back: a page of the records that match a filter,
//! after a sequence number (docs/audit.md § Query). Pages are cut by
//! sequence number, so resuming after a page's cursor neither repeats
//! nor skips a record, whatever is written meanwhile.

use super::record::{Class, Outcome, Record};
use super::store::segments;
use crate::error::{Error, Result};
use crate::path::VfsPath;
use std::io::BufRead;
use std::path::Path;

/// Which records a query returns: each condition given must hold.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// The record's time is at or after it (RFC 3339, as records write it).
    pub since: Option<String>,
    /// The record's time is before it.
    pub until: Option<String>,
    /// Its principal.
    pub principal: Option<String>,
    /// One of its paths lies at or below it.
    pub path_prefix: Option<VfsPath>,
    /// Its operation.
    pub operation: Option<String>,
    /// Its class.
    pub class: Option<Class>,
    /// Its result.
    pub result: Option<Outcome>,
    /// Its label.
    pub label: Option<String>,
    /// Its tool-call id.
    pub tool_call_id: Option<String>,
}

/// An RFC 3339 time as records write it (UTC, microseconds), so times
/// compare as text; INVALID_ARGUMENT naming `what` otherwise.
pub fn normalized_time(what: &str, text: &str) -> Result<String> {
    let time = humantime::parse_rfc3339_weak(text).map_err(|e| {
        Error::InvalidArgument(format!(
            "{what} {text:?} is not an RFC 3339 time like 2026-01-31T12:00:00Z ({e})"
        ))
    })?;
    Ok(humantime::format_rfc3339_micros(time).to_string())
}

impl Filter {
    /// True when `record` meets every condition.
    pub fn matches(&self, record: &Record) -> bool {
        let equal = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        self.since
            .as_deref()
            .is_none_or(|s| record.time.as_str() >= s)
            && self
                .until
                .as_deref()
                .is_none_or(|u| record.time.as_str() < u)
            && equal(&self.principal, &record.principal)
            && equal(&self.operation, &record.operation)
            && equal(&self.label, &record.label)
            && equal(&self.tool_call_id, &record.tool_call_id)
            && self.class.is_none_or(|c| record.class == Some(c))
            && self.result.is_none_or(|r| record.result == Some(r))
            && self.path_prefix.as_ref().is_none_or(|prefix| {
                record
                    .paths
                    .iter()
                    .filter_map(|p| VfsPath::parse(p).ok())
                    .any(|p| p.is_within(prefix))
            })
    }
}

/// One page of a query.
#[derive(Debug, Default)]
pub struct Page {
    /// The matching records' lines, in sequence order.
    pub lines: Vec<String>,
    /// The last sequence number the page covered.
    pub cursor: u64,
    /// False when the page reached the end of the store.
    pub more: bool,
}

/// Bytes of record lines one page carries at most (one record, which is
/// far smaller: at most [`super::MAX_PATHS`] paths without control
/// characters and a request cut short, always fits).
pub const MAX_PAGE_BYTES: usize = 256 << 10;

/// Records one page reads at most, matching or not: a filter that matches
/// little answers pages with few or no lines and a cursor that moves on,
/// so no page scans the whole store.
pub const MAX_SCANNED: usize = 100_000;

/// At most `limit` lines, and [`MAX_PAGE_BYTES`], of the records after
/// `after` that `filter` matches, reading at most [`MAX_SCANNED`] records.
pub fn page(dir: &Path, filter: &Filter, after: u64, limit: usize) -> Result<Page> {
    let unreadable = |e: std::io::Error| Error::Internal(format!("reading the audit log: {e}"));
    let files = segments(dir).map_err(unreadable)?;
    // The last segment starting at or before the first record wanted.
    let start = files
        .iter()
        .rposition(|(first, _)| *first <= after + 1)
        .unwrap_or(0);
    let mut page = Page {
        cursor: after,
        ..Page::default()
    };
    let (mut bytes, mut scanned) = (0, 0);
    for (_, path) in &files[start..] {
        let mut reader = match std::fs::File::open(path) {
            Ok(file) => std::io::BufReader::new(file),
            // Retention dropped it meanwhile: its records are gone.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(unreadable(e)),
        };
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).map_err(unreadable)? == 0 || !line.ends_with('\n') {
                break; // the end, or a line still being written
            }
            let text = line.trim_end_matches('\n');
            let Ok(record) = serde_json::from_str::<Record>(text) else {
                break;
            };
            if record.seq <= page.cursor {
                continue;
            }
            let matches = filter.matches(&record);
            let full = page.lines.len() == limit
                || (matches && !page.lines.is_empty() && bytes + text.len() > MAX_PAGE_BYTES);
            if full || scanned == MAX_SCANNED {
                page.more = true;
                return Ok(page);
            }
            scanned += 1;
            page.cursor = record.seq;
            if matches {
                bytes += text.len();
                page.lines.push(text.to_owned());
            }
        }
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment of `count` records from seq 1, principal `p{seq % 1000}`
    /// and a label of `pad` bytes.
    fn store(count: u64, pad: usize) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::new();
        for seq in 1..=count {
            let record = Record {
                seq,
                principal: format!("p{}", seq % 1000),
                label: "l".repeat(pad),
                ..Record::default()
            };
            text.push_str(&serde_json::to_string(&record).unwrap());
            text.push('\n');
        }
        let name = format!("segment-{:020}.jsonl", 1);
        std::fs::write(dir.path().join(name), text).unwrap();
        dir
    }

    /// A filter that matches nothing reads at most MAX_SCANNED records per
    /// page and moves its cursor on; the pages together cover the store
    /// exactly once.
    #[test]
    fn a_page_reads_a_bounded_number_of_records() {
        let total = MAX_SCANNED as u64 + 10;
        let dir = store(total, 0);
        let none = Filter {
            principal: Some("nobody".into()),
            ..Filter::default()
        };
        let first = page(dir.path(), &none, 0, 1000).unwrap();
        assert!(first.lines.is_empty() && first.more);
        assert_eq!(first.cursor, MAX_SCANNED as u64);
        let second = page(dir.path(), &none, first.cursor, 1000).unwrap();
        assert!(second.lines.is_empty() && !second.more);
        assert_eq!(second.cursor, total);
        let one = Filter {
            principal: Some("p7".into()),
            ..Filter::default()
        };
        let (mut after, mut seen) = (0, Vec::new());
        loop {
            let p = page(dir.path(), &one, after, 1000).unwrap();
            seen.extend(
                p.lines
                    .iter()
                    .map(|l| serde_json::from_str::<Record>(l).unwrap().seq),
            );
            after = p.cursor;
            if !p.more {
                break;
            }
        }
        let want: Vec<u64> = (1..=total).filter(|s| s % 1000 == 7).collect();
        assert_eq!(seen, want);
    }

    /// A page's lines stop at MAX_PAGE_BYTES, but always hold one.
    #[test]
    fn a_page_carries_a_bounded_number_of_bytes() {
        let dir = store(5000, 1000);
        let p = page(dir.path(), &Filter::default(), 0, 1000).unwrap();
        let bytes: usize = p.lines.iter().map(String::len).sum();
        assert!(
            bytes <= MAX_PAGE_BYTES && bytes > MAX_PAGE_BYTES - 2000,
            "{bytes}"
        );
        assert!(p.more && p.lines.len() < 1000, "{}", p.lines.len());
        let next = page(dir.path(), &Filter::default(), p.cursor, 1000).unwrap();
        let first: Record = serde_json::from_str(&next.lines[0]).unwrap();
        assert_eq!(
            first.seq,
            p.cursor + 1,
            "the next page starts where it stopped"
        );
        let tiny = page(dir.path(), &Filter::default(), 0, 1).unwrap();
        assert_eq!(tiny.lines.len(), 1);
    }
}
