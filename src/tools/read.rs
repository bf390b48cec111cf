//! The Read tool: a window of a text file, numbered `cat -n` style; an
//! image or a PDF in base64 with its MIME type ([`media`]).
//!
//! Flow: resolve, check `read_file`, one `Backend::read` on a blocking thread,
//! refuse binary content (a NUL byte near the start, as git and ripgrep
//! decide), count the lines without collecting them, decode only lines
//! `[start_line, start_line + limit)` (invalid UTF-8 replaced, status partial,
//! with a warning) and number them with the numbering of docs/contract.md § Text formats (long lines
//! continue as `5.1`, `5.2`).
//!
//! `stats.version` is the file's version: Write, Edit and MultiEdit need it as
//! `expected_version`, so a model cannot overwrite what it has not read.
//!
//! Errors: NOT_FOUND "File '{p}' does not exist.", IS_DIRECTORY "Path '{p}' is
//! a directory. Use LS to explore it.", BINARY_FILE "File '{p}' appears to be
//! binary. Cannot read as text.", INVALID_PARAM "start_line ({s}) exceeds file
//! length ({t} lines). Valid range: 1 to {t}." and out-of-range parameters
//! (never clamped).

use super::args::Args;
use super::envelope::version_json;
use super::media;
use super::params::{Param, Params};
use super::{Call, Object, Outcome, Status, ToolError};
use crate::access::Op;
use crate::entry::Entry;
use crate::error::Error;
use crate::text;
use base64::Engine as _;
use serde_json::json;
use std::fmt::Write as _;
use std::sync::LazyLock;
use std::time::UNIX_EPOCH;

/// Shown to the model.
pub const DESCRIPTION: &str = "Read a text file. Returns its lines numbered like 'cat -n' \
(number, tab, line), starting at start_line, at most limit lines; the text says how to continue \
when the file is longer. stats.version is the file's current version: pass it as \
expected_version to Write, Edit or MultiEdit. An image (PNG, JPEG, GIF, WebP) or a PDF of up to \
5 MiB is returned whole, base64 with its MIME type. Other binary files are refused; use LS for \
directories.";

/// Most lines one call returns.
pub const MAX_LIMIT: i64 = 2000;
/// Lines returned when `limit` is not given.
pub const DEFAULT_LIMIT: i64 = 500;

/// The parameters, in the order the model sees them (`super::params`).
pub static PARAMS: LazyLock<Params> = LazyLock::new(|| {
    Params::new(vec![
        Param::required(
            "path",
            json!({"type": "string", "description": "File to read (relative to project root or absolute within it)."}),
        ),
        Param::optional(
            "start_line",
            json!({"type": "integer", "description": "First line to read, 1-based (>= 1).", "default": 1, "minimum": 1}),
        ),
        Param::optional(
            "limit",
            json!({"type": "integer", "description": "Max lines to return (1-2000).", "default": DEFAULT_LIMIT, "minimum": 1, "maximum": MAX_LIMIT}),
        ),
    ])
});
const OUTSIDE: &str = "Access denied. Path must be within the project root.";

/// Maps a failed read of `shown` to the tool's messages (shared with the
/// editing tools, which read first).
pub fn read_error(e: Error, shown: &str) -> ToolError {
    let message = match e.kind() {
        Error::NotFound(_) => format!("File '{shown}' does not exist."),
        Error::IsDirectory(_) => format!("Path '{shown}' is a directory. Use LS to explore it."),
        Error::Binary(_) => format!("File '{shown}' appears to be binary. Cannot read as text."),
        Error::PermissionDenied(_) => format!("Permission denied accessing '{shown}'."),
        Error::TooLarge(detail) => format!("Cannot read '{shown}': {detail}."),
        _ => format!("Failed to read file - {e}"),
    };
    ToolError::new(e, message)
}

/// What Read found: a text file's window (its entry, whether it was
/// lossy, its line count, the numbered lines) or a media file in base64.
enum Loaded {
    Text(Entry, bool, usize, Option<String>),
    Media(Entry, media::Media, String),
}

/// A media file's answer: its base64 and MIME type in `data` (which MCP
/// turns into image content or an embedded resource), a line of text.
fn media_outcome(shown: &str, entry: &Entry, media: media::Media, encoded: String) -> Outcome {
    let kind = if media.image { "image" } else { "document" };
    Outcome {
        status: Status::Success,
        data: object! {
            "path" => shown,
            "logical_path" => entry.path.as_str(),
            "type" => kind,
            "mime_type" => media.mime_type,
            "encoding" => "base64",
            "data" => encoded,
        },
        text: format!(
            "Read {kind} '{shown}' ({}, {} bytes); its content is in data.data, base64.",
            media.mime_type, entry.size
        ),
        stats: object! {
            "file_size_bytes" => entry.size,
            "file_mtime_ms" => mtime_ms(entry),
            "version" => version_json(entry.version),
        },
    }
}

/// The file's modification time in milliseconds since the epoch.
fn mtime_ms(entry: &Entry) -> u64 {
    entry
        .modified
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Runs Read.
pub async fn run(call: &mut Call, raw: &Object) -> Result<Outcome, ToolError> {
    let args = Args::new("Read", raw, PARAMS.names())?;
    let path_arg = args.required_string("path")?;
    let start = args.integer_in("start_line", 1, i64::MAX, 1, || {
        "start_line must be an integer >= 1.".into()
    })? as usize;
    let limit = args.integer_in("limit", 1, MAX_LIMIT, DEFAULT_LIMIT, || {
        format!("limit must be an integer between 1 and {MAX_LIMIT}.")
    })? as usize;
    let path = call.resolve(path_arg, OUTSIDE)?;
    let shown = call.display(&path);
    call.check(&path, Op::ReadFile)?;
    // Lines are counted, not collected, and only the window is decoded and
    // numbered, all on the blocking thread.
    let loaded = call
        .service
        .run_asked(&call.caller, move |files| {
            let (data, entry) = files.read(&path, Op::ReadFile)?;
            if let Some(media) = media::detect(&data) {
                files.check(&path, Op::ReadBinary)?;
                media::check_size(&path, media, data.len() as u64)?;
                files.charge(data.len().div_ceil(3) as u64 * 4, "encoding the media file")?;
                let encoded = base64::engine::general_purpose::STANDARD.encode(&data);
                return Ok(Loaded::Media(entry, media, encoded));
            }
            if text::is_binary(&data) {
                return Err(Error::Binary(path.to_string()));
            }
            let lossy = std::str::from_utf8(&data).is_err();
            let total = text::count_lines(&data);
            let end = total.min(start - 1 + limit);
            let numbered = (start <= end).then(|| {
                let window =
                    String::from_utf8_lossy(&data[text::line_range(&data, start - 1, end)]);
                text::format_lines_numbered(window.lines(), start as u64)
            });
            Ok(Loaded::Text(entry, lossy, total, numbered))
        })
        .await
        .map_err(|e| read_error(e, &shown))?;
    let (entry, lossy, total, numbered) = match loaded {
        Loaded::Text(entry, lossy, total, numbered) => (entry, lossy, total, numbered),
        Loaded::Media(entry, media, encoded) => {
            return Ok(media_outcome(&shown, &entry, media, encoded));
        }
    };
    let mut stats = object! {
        "total_lines" => total,
        "lines_returned" => 0,
        "file_size_bytes" => entry.size,
        "file_mtime_ms" => mtime_ms(&entry),
        "version" => version_json(entry.version),
    };
    if total == 0 {
        return Ok(Outcome {
            status: Status::Success,
            data: object! {"path" => shown.clone(), "start_line" => 1, "end_line" => 0, "truncated" => false},
            text: format!("Read 0 lines from '{shown}' (file is empty)."),
            stats,
        });
    }
    let Some(numbered) = numbered else {
        return Err(ToolError::invalid(format!(
            "start_line ({start}) exceeds file length ({total} lines). Valid range: 1 to {total}."
        )));
    };
    let end = total.min(start - 1 + limit);
    let returned = end - (start - 1);
    let truncated = end < total;
    let mut out = format!("Read {returned} lines from '{shown}' (Lines {start}-{end}).");
    if truncated {
        // Writing into a String cannot fail.
        let _ = write!(
            out,
            "\n[Truncated: Showing {returned} of {total} lines. Use start_line={} to continue ({} lines remaining).]",
            end + 1,
            total - end
        );
    }
    if lossy {
        out.push_str(
            "\n[Warning: File is not valid UTF-8; invalid bytes are shown as U+FFFD. Edit and \
             MultiEdit cannot change it; Write replaces it whole.]",
        );
    }
    out.push_str("\n\n");
    out.push_str(&numbered);
    stats.insert("lines_returned".into(), returned.into());
    Ok(Outcome {
        status: Status::partial_if(truncated || lossy),
        data: object! {
            "path" => shown,
            "start_line" => start,
            "end_line" => end,
            "truncated" => truncated,
        },
        text: out,
        stats,
    })
}
