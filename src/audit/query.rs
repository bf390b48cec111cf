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

/// At most `limit` lines of the records after `after` that `filter`
/// matches. `charge` is asked for each line's bytes before it is kept.
pub fn page(
    dir: &Path,
    filter: &Filter,
    after: u64,
    limit: usize,
    charge: &mut dyn FnMut(u64) -> Result<()>,
) -> Result<Page> {
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
            if page.lines.len() == limit {
                page.more = true;
                return Ok(page);
            }
            page.cursor = record.seq;
            if filter.matches(&record) {
                charge(text.len() as u64)?;
                page.lines.push(text.to_owned());
            }
        }
    }
    Ok(page)
}
