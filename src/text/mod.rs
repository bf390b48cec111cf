//! Text as the contract shows it (docs/contract.md § Text formats): pure
//! functions over a file's bytes, shared by the Filesystem RPCs and the
//! Tools; the tiers only store and fetch.
//!
//! - this module: decoding (lossy for reading, strict for editing), line
//!   counting and splitting, binary detection, the empty-file reminder;
//! - [`lines`]: `cat -n` numbering, the line windows of Read, and lines
//!   found by byte offset (a whole file's lines are never collected);
//! - [`edit`]: Edit and MultiEdit's string replacements;
//! - [`insert`]: insert-at-line, for Claude's memory and text-editor tools;
//! - [`read_re`]: ReadRe's regex windows;
//! - [`grep`]: the Grep tool's three output modes;
//! - [`patch`]: OpenAI's apply_patch (V4A) format, parsed and applied;
//! - [`diff`]: unified diffs of a change, bounded in time and size (the
//!   tools' previews, the Diff RPC and the History tool);
//! - [`merge`]: three-way line merges (a branch's merge).
//!
//! Decisions: lengths are counted in `char`s (Unicode scalar values), like
//! Python's `len(str)`, and text is only ever cut on a `char` boundary. Lines
//! end at `\n` or `\r\n` (the `\r` is not shown) and a final terminator
//! does not start an extra empty line: exactly [`str::lines`]. Binary content
//! is detected the way git and ripgrep do, by a NUL byte near the start.

pub mod diff;
pub mod edit;
pub mod grep;
pub mod insert;
pub mod lines;
pub mod merge;
pub mod patch;
pub mod read_re;

pub use edit::{EditSpec, apply_edit, apply_edits};
pub use lines::{Window, format_lines_numbered, line_range, read_window};
pub use read_re::{MAX_READ_RE_BYTES, MAX_READ_RE_MATCHES, regex_windows};

use crate::error::{Error, Result};

/// What a long text operation answers to: the caller's memory share, and
/// its deadline. A view, an insert or a patch charges what its answer or new
/// text will hold before it builds it, and a matcher asks whether it may go
/// on as it works, so neither holds memory its caller was not granted nor
/// runs on after the caller's time is up (docs/security.md).
pub struct Costs<'a> {
    /// Charges `bytes` about to be held (`what` names them in a refusal),
    /// or refuses them (RESOURCE_EXHAUSTED naming the limit).
    pub charge: &'a dyn Fn(u64, &str) -> Result<()>,
    /// An error once the operation must stop (its deadline passed).
    pub alive: &'a dyn Fn() -> Result<()>,
}

impl Costs<'static> {
    /// Costs nobody counts: tests, and callers whose input is already bounded.
    pub fn unbounded() -> Costs<'static> {
        fn charge(_: u64, _: &str) -> Result<()> {
            Ok(())
        }
        fn alive() -> Result<()> {
            Ok(())
        }
        Costs {
            charge: &charge,
            alive: &alive,
        }
    }
}

/// A file's bytes decoded for text operations.
pub struct Text<'a> {
    /// The text (invalid UTF-8 replaced when `lossy`).
    pub text: std::borrow::Cow<'a, str>,
    /// True when invalid bytes were replaced.
    pub lossy: bool,
}

/// Decodes a file for reading: binary content (a NUL byte near the start) is
/// refused, invalid UTF-8 is replaced and flagged.
pub fn decode<'a>(path: &str, data: &'a [u8]) -> Result<Text<'a>> {
    if is_binary(data) {
        return Err(Error::Binary(path.to_owned()));
    }
    let text = String::from_utf8_lossy(data);
    let lossy = matches!(text, std::borrow::Cow::Owned(_));
    Ok(Text { text, lossy })
}

/// Decodes a file for editing: it must be valid UTF-8 text, because writing
/// back a lossy decoding would corrupt it.
pub fn decode_strict<'a>(path: &str, data: &'a [u8]) -> Result<&'a str> {
    if is_binary(data) {
        return Err(Error::Binary(path.to_owned()));
    }
    std::str::from_utf8(data).map_err(|e| {
        Error::Binary(format!(
            "{path} is not valid UTF-8 (first bad byte at offset {})",
            e.valid_up_to()
        ))
    })
}

/// Splits content into lines without their terminators, the way every line
/// count and Read window in the server sees a file.
///
/// Lines end at `\n` or `\r\n`; a final terminator does not start an extra
/// empty line, and a bare `\r` stays part of the line (this is [`str::lines`]):
/// `"a\nb\n"` and `"a\nb"` give `["a", "b"]`, `""` gives `[]`, `"\n"` gives `[""]`.
pub fn split_lines(content: &str) -> Vec<&str> {
    content.lines().collect()
}

/// The number of lines [`split_lines`] finds in `content`, counted without
/// collecting them (a file of short lines has millions).
pub fn count_lines(content: &[u8]) -> usize {
    let breaks = memchr::memchr_iter(b'\n', content).count();
    breaks + usize::from(!content.is_empty() && !content.ends_with(b"\n"))
}

/// Warning returned instead of content when a file exists but is empty or
/// whitespace only, so the model does not mistake an empty result for an error.
pub const EMPTY_CONTENT_WARNING: &str = "System reminder: File exists but has empty contents";

/// Returns [`EMPTY_CONTENT_WARNING`] when `content` is empty or only
/// whitespace, so the caller can tell the model the file exists but is blank
/// instead of returning an empty string (deepagents' `check_empty_content`).
pub fn check_empty_content(content: &str) -> Option<&'static str> {
    content.trim().is_empty().then_some(EMPTY_CONTENT_WARNING)
}

/// How many leading bytes [`is_binary`] inspects. Git sniffs its first 8000
/// bytes for a NUL; 8 KiB is the same idea rounded to a page-friendly size.
const BINARY_SNIFF_BYTES: usize = 8192;

/// Whether content is binary rather than text, by the heuristic git and
/// ripgrep use: a NUL byte in the first [`BINARY_SNIFF_BYTES`] bytes means
/// binary. Text in any ASCII-compatible encoding passes; UTF-16 text counts
/// as binary, as it does for git. Empty content is text.
pub fn is_binary(content: &[u8]) -> bool {
    let head = &content[..content.len().min(BINARY_SNIFF_BYTES)];
    head.contains(&0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_lines_agrees_with_split_lines() {
        for text in ["", "\n", "a", "a\n", "a\nb", "a\r\n\r\nb\n", "a\rb"] {
            assert_eq!(
                count_lines(text.as_bytes()),
                split_lines(text).len(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn split_lines_drops_terminators_and_final_empty_line() {
        assert_eq!(split_lines("a\nb\n"), ["a", "b"]);
        assert_eq!(split_lines("a\nb"), ["a", "b"]);
        assert_eq!(split_lines(""), Vec::<&str>::new());
        assert_eq!(split_lines("\n"), [""]);
        assert_eq!(split_lines("a\r\n\r\nb"), ["a", "", "b"]);
        assert_eq!(split_lines("a\rb"), ["a\rb"]);
    }

    #[test]
    fn empty_or_blank_content_gets_warning() {
        assert_eq!(check_empty_content(""), Some(EMPTY_CONTENT_WARNING));
        assert_eq!(
            check_empty_content(" \n\t\r\n"),
            Some(EMPTY_CONTENT_WARNING)
        );
        assert_eq!(check_empty_content(" x "), None);
    }

    #[test]
    fn nul_byte_near_start_means_binary() {
        assert!(!is_binary(b""));
        assert!(!is_binary("plain text, ünïcödé\n".as_bytes()));
        assert!(is_binary(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"));
        let mut late = vec![b'a'; BINARY_SNIFF_BYTES - 1];
        late.push(0);
        assert!(is_binary(&late));
        let mut too_late = vec![b'a'; BINARY_SNIFF_BYTES];
        too_late.push(0);
        assert!(!is_binary(&too_late));
    }
}
