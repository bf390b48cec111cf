//! A file's record: its metadata, who made the version and how, and its
//! content when the file is small. The Store keeps it as the value of a
//! `meta` key (and of a `versions` key once superseded); the object tier as
//! the body of a file's head object, whose bytes, holding the version, make
//! every version's ETag unique.
//!
//! Layout (big-endian): `format (1) | flags (1) | version (8) | size (8) |
//! created ns (8) | modified ns (8) | blob id (8)`, then (format 2) the
//! origin: `operation (1) | principal length (1) | principal | handle length
//! (1) | handle`, then, when the `INLINE` flag is set, the whole content. A
//! past version (the `versions` column family) is the same value it had as
//! the current one; a tombstone has the `TOMBSTONE` flag and no content; the
//! `EXECUTABLE` flag is the file's executable bit.
//! Format 1 values (written before history existed) decode with an unknown
//! origin. Files up to [`INLINE_MAX_BYTES`] live inline so a small-file
//! read is one point lookup and Grep reads them straight from the iterator it
//! walks with; larger files are cut into [`CHUNK_BYTES`] chunks in the `chunks`
//! column family so no single value (or gRPC message) ever holds a huge file.
//!
//! Errors: a value that does not decode is reported as `Internal` naming the
//! path, never guessed at.

use crate::backend::ordered::{FileMeta, Past, Stored};
use crate::change::{Operation, Origin};
use crate::error::{Error, Result};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Format byte written today; another is refused, not misread (format 1,
/// without the origin, is still read).
const FORMAT: u8 = 2;
/// The format before origins were kept.
const FORMAT_NO_ORIGIN: u8 = 1;
/// Flag: the content follows the header.
const INLINE: u8 = 1;
/// Flag: a tombstone (a deletion kept in history).
const TOMBSTONE: u8 = 2;
/// Flag: the file's executable bit is set. Values written before the bit
/// existed lack the flag, so their files read as not executable.
const EXECUTABLE: u8 = 4;
/// Header bytes before inline content.
const HEADER_BYTES: usize = 2 + 5 * 8;

/// Largest file stored inside its metadata value: 64 KiB keeps directory
/// listings (which read these values) cheap while covering typical notes and
/// source files, so reads and Grep of them need no second lookup.
pub const INLINE_MAX_BYTES: usize = 64 << 10;
/// Size of one stored chunk of a large file: 1 MiB, the same as a ReadBytes
/// message, so streaming a file is one lookup per message.
pub const CHUNK_BYTES: usize = 1 << 20;

/// One file's metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Generation, unique in the store and growing.
    pub version: u64,
    /// Content length in bytes.
    pub size: u64,
    /// Creation time, nanoseconds since the epoch.
    pub created: u64,
    /// Last change, nanoseconds since the epoch.
    pub modified: u64,
    /// True when the content is inside the value.
    pub inline: bool,
    /// Id of the chunks holding a non-inline file's content (0 when inline).
    /// Usually the version that stored them; a streamed upload draws its id
    /// when it starts, before the version it commits with.
    pub blob: u64,
    /// The file's executable bit.
    pub executable: bool,
}

/// What the key-ordered engine needs of a record (the Store's files, the
/// object tier's heads).
impl Stored for Meta {
    fn meta(&self) -> FileMeta {
        FileMeta {
            version: self.version,
            size: self.size,
            created: self.created_time(),
            modified: self.modified_time(),
            executable: self.executable,
        }
    }

    fn content(&self) -> u64 {
        self.content_blob()
    }
}

impl Meta {
    /// The metadata of a tombstone: `version` deleted now, no content.
    pub fn tombstone(version: u64) -> Meta {
        let now = nanos(SystemTime::now());
        Meta {
            version,
            size: 0,
            created: now,
            modified: now,
            inline: true,
            blob: 0,
            executable: false,
        }
    }

    /// Number of chunks of a non-inline file.
    pub fn chunks(&self) -> u32 {
        if self.inline {
            0
        } else {
            // Sizes are bounded by max_file_bytes (at most 2^40), so the
            // count fits easily in u32 chunks of 1 MiB.
            self.size.div_ceil(CHUNK_BYTES as u64) as u32
        }
    }

    /// The blob holding the content, 0 when it is inline.
    pub fn content_blob(&self) -> u64 {
        if self.inline { 0 } else { self.blob }
    }

    /// Creation time.
    pub fn created_time(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(self.created)
    }

    /// Modification time.
    pub fn modified_time(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(self.modified)
    }
}

/// Nanoseconds since the epoch of `t` (0 before the epoch).
pub fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Encodes `meta` made by `origin`, with `content` inline when given.
pub fn encode(meta: &Meta, origin: &Origin, content: Option<&[u8]>) -> Vec<u8> {
    encode_flagged(meta, origin, content, 0)
}

/// Encodes a tombstone: version `meta.version` deleted at `meta.modified`
/// by `origin`.
pub fn encode_tombstone(meta: &Meta, origin: &Origin) -> Vec<u8> {
    encode_flagged(meta, origin, Some(&[]), TOMBSTONE)
}

fn encode_flagged(meta: &Meta, origin: &Origin, content: Option<&[u8]>, flags: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + 64 + content.map_or(0, <[u8]>::len));
    out.push(FORMAT);
    let inline = if content.is_some() { INLINE } else { 0 };
    let executable = if meta.executable { EXECUTABLE } else { 0 };
    out.push(flags | inline | executable);
    for n in [
        meta.version,
        meta.size,
        meta.created,
        meta.modified,
        meta.blob,
    ] {
        out.extend_from_slice(&n.to_be_bytes());
    }
    origin.encode_into(&mut out);
    if let Some(content) = content {
        out.extend_from_slice(content);
    }
    out
}

/// Bytes of one entry of a history index.
const PAST_ENTRY_BYTES: usize = 24;

/// Encodes a file's index of past versions, newest first: per version its
/// number, its time in nanoseconds and its blob id (0: inline or a
/// tombstone), each a big-endian u64.
pub fn encode_past(past: &[Past]) -> Vec<u8> {
    let mut out = Vec::with_capacity(past.len() * PAST_ENTRY_BYTES);
    for p in past {
        for word in [p.version, nanos(p.time), p.content] {
            out.extend_from_slice(&word.to_be_bytes());
        }
    }
    out
}

/// Decodes an index of past versions read for `path`.
pub fn decode_past(path: &dyn std::fmt::Display, value: &[u8]) -> Result<Vec<Past>> {
    if !value.len().is_multiple_of(PAST_ENTRY_BYTES) {
        return Err(Error::Internal(format!(
            "corrupt Store history index for {path}"
        )));
    }
    let word = |b: &[u8]| u64::from_be_bytes(b.try_into().unwrap_or([0; 8]));
    Ok(value
        .chunks_exact(PAST_ENTRY_BYTES)
        .map(|entry| Past {
            version: word(&entry[..8]),
            time: UNIX_EPOCH + Duration::from_nanos(word(&entry[8..16])),
            content: word(&entry[16..]),
        })
        .collect())
}

/// True when the value is a tombstone.
pub fn is_tombstone(value: &[u8]) -> bool {
    value.get(1).is_some_and(|flags| flags & TOMBSTONE != 0)
}

/// The origin of a format-2 value and where it ends (the content starts).
fn origin_section(value: &[u8]) -> Option<(Origin, usize)> {
    let (origin, len) = Origin::decode_prefix(value.get(HEADER_BYTES..)?)?;
    Some((origin, HEADER_BYTES + len))
}

/// The origin kept in a value read for `path` (format 1: unknown, shown as
/// a write by nobody).
pub fn origin(path: &dyn std::fmt::Display, value: &[u8]) -> Result<Origin> {
    if value.first() == Some(&FORMAT_NO_ORIGIN) {
        return Ok(Origin::external(Operation::Write));
    }
    origin_section(value)
        .map(|(origin, _)| origin)
        .ok_or_else(|| Error::Internal(format!("corrupt Store origin for {path}")))
}

/// Decodes a value read for `path`: the metadata and the inline content.
pub fn decode<'v>(path: &dyn std::fmt::Display, value: &'v [u8]) -> Result<(Meta, &'v [u8])> {
    let corrupt = |why: &str| Error::Internal(format!("corrupt Store metadata for {path}: {why}"));
    if value.len() < HEADER_BYTES {
        return Err(corrupt("value too short"));
    }
    let content_at = match value[0] {
        FORMAT => {
            origin_section(value)
                .ok_or_else(|| corrupt("origin cut short"))?
                .1
        }
        FORMAT_NO_ORIGIN => HEADER_BYTES,
        other => return Err(corrupt(&format!("unknown format {other}"))),
    };
    let inline = value[1] & INLINE != 0;
    let word = |i: usize| {
        let at = 2 + i * 8;
        let mut b = [0; 8];
        b.copy_from_slice(&value[at..at + 8]);
        u64::from_be_bytes(b)
    };
    let meta = Meta {
        version: word(0),
        size: word(1),
        created: word(2),
        modified: word(3),
        inline,
        blob: word(4),
        executable: value[1] & EXECUTABLE != 0,
    };
    let content = &value[content_at..];
    if inline && content.len() as u64 != meta.size {
        return Err(corrupt("inline content length differs from size"));
    }
    Ok((meta, content))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips_with_and_without_content() {
        let meta = Meta {
            version: 9,
            size: 3,
            created: 1,
            modified: 2,
            inline: true,
            blob: 0,
            executable: true,
        };
        let origin = Origin {
            principal: "agent".into(),
            handle: "h1".into(),
            session: "s1".into(),
            label: "turn/7".into(),
            changeset: "cs-1".into(),
            operation: Operation::Edit,
        };
        let value = encode(&meta, &origin, Some(b"abc"));
        assert_eq!(decode(&"/x", &value).unwrap(), (meta, &b"abc"[..]));
        assert_eq!(super::origin(&"/x", &value).unwrap(), origin);
        // A value from before sessions and labels were kept decodes with
        // them empty.
        let unattributed = Origin {
            session: String::new(),
            label: String::new(),
            changeset: String::new(),
            ..origin.clone()
        };
        let old = encode(&meta, &unattributed, Some(b"abc"));
        assert_eq!(old[HEADER_BYTES], Operation::Edit.code());
        assert_eq!(decode(&"/x", &old).unwrap(), (meta, &b"abc"[..]));
        assert_eq!(super::origin(&"/x", &old).unwrap(), unattributed);
        assert!(!is_tombstone(&value));
        let tomb = encode_tombstone(&Meta { size: 0, ..meta }, &origin);
        assert!(is_tombstone(&tomb));
        assert_eq!(decode(&"/x", &tomb).unwrap().1, b"");
        let big = Meta {
            size: 3 * CHUNK_BYTES as u64 + 1,
            inline: false,
            blob: 9,
            ..meta
        };
        let value = encode(&big, &Origin::external(Operation::Write), None);
        let (back, rest) = decode(&"/x", &value).unwrap();
        assert_eq!((back, rest.len(), back.chunks()), (big, 0, 4));
    }

    #[test]
    fn corrupt_values_are_errors_naming_the_path() {
        let err = decode(&"/m/x", b"\x01").unwrap_err();
        assert!(err.to_string().contains("/m/x"), "{err}");
        let mut bad = encode(
            &Meta {
                version: 1,
                size: 5,
                created: 0,
                modified: 0,
                inline: true,
                blob: 0,
                executable: false,
            },
            &Origin::external(Operation::Write),
            Some(b"abc"),
        );
        assert!(decode(&"/m/x", &bad).is_err());
        bad[0] = 3;
        assert!(decode(&"/m/x", &bad).is_err());
    }

    #[test]
    fn history_indexes_round_trip() {
        let t = UNIX_EPOCH + Duration::from_nanos(1_700_000_000_000_000_001);
        let past = vec![
            Past {
                version: 9,
                time: t,
                content: 0,
            },
            Past {
                version: 3,
                time: UNIX_EPOCH,
                content: 3,
            },
        ];
        assert_eq!(decode_past(&"/x", &encode_past(&past)).unwrap(), past);
        assert!(decode_past(&"/x", &[0; 23]).is_err());
    }

    #[test]
    fn values_of_the_first_format_still_decode() {
        let mut value = vec![FORMAT_NO_ORIGIN, INLINE];
        for n in [4u64, 2, 1, 2, 0] {
            value.extend_from_slice(&n.to_be_bytes());
        }
        value.extend_from_slice(b"hi");
        let (meta, content) = decode(&"/old", &value).unwrap();
        assert_eq!((meta.version, content), (4, &b"hi"[..]));
        assert_eq!(origin(&"/old", &value).unwrap().principal, "");
    }
}
