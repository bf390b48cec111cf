//! Text formatting for agents: `cat -n` numbering, grep result rendering,
//! truncation and text/binary detection, ported from LangChain deepagents'
//! `backends/utils.py` by way of its Go port (docs/contract.md § Text formats).
//!
//! The server's Read RPC uses it to number the window of lines it returns, and
//! the Tools layer uses it to render grep results, warn about empty files,
//! truncate oversized tool results and name evicted results after their tool
//! call id. Everything here is pure (no I/O, no allocation beyond the output).
//!
//! Decisions:
//! - Lengths are counted in `char`s (Unicode scalar values), like Python's
//!   `len(str)`, never in bytes, and text is only ever cut on a `char`
//!   boundary, so a multi-byte character is never split.
//! - Lines end at `\n` or `\r\n` (the `\r` is not shown) and a final line
//!   terminator does not start an extra empty line; this is exactly
//!   [`str::lines`]. A bare `\r` is content, not a line ending.
//! - A line longer than [`MAX_LINE_LENGTH`] characters is shown as several
//!   rows labelled `5`, `5.1`, `5.2`, … so line numbers keep matching the file.
//! - Line numbers are `u64` and saturate instead of overflowing.
//! - Grep matches are borrowed ([`GrepLine`]); grouping keeps first-seen order
//!   so output is deterministic and follows the search order.
//! - Binary content is detected the way git and ripgrep do, by a NUL byte near
//!   the start; paths are classified by extension only as a cheap hint, with
//!   unknown extensions left to content sniffing.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::{Display, Write as _};

/// Warning returned instead of content when a file exists but is empty or
/// whitespace only, so the model does not mistake an empty result for an error.
pub const EMPTY_CONTENT_WARNING: &str = "System reminder: File exists but has empty contents";

/// Longest line, in characters, shown on one row; longer lines are split into
/// continuation rows so a single minified line cannot flood a tool result.
pub const MAX_LINE_LENGTH: usize = 10000;

/// Width the line-number column is right-aligned to, as `cat -n` does.
pub const LINE_NUMBER_WIDTH: usize = 6;

/// Default token budget for one tool result (the same threshold deepagents
/// uses to evict large results to a file).
pub const TOOL_RESULT_TOKEN_LIMIT: usize = 20000;

/// Rough characters-per-token ratio used to turn a token budget into a
/// character budget, as deepagents does.
pub const CHARS_PER_TOKEN: usize = 4;

/// Appended (after a newline) to a truncated tool result, telling the model how
/// to get a complete answer.
pub const TRUNCATION_GUIDANCE: &str =
    "... [results truncated, try being more specific with your parameters]";

/// How many leading bytes [`is_binary`] inspects. Git sniffs its first 8000
/// bytes for a NUL; 8 KiB is the same idea rounded to a page-friendly size.
pub const BINARY_SNIFF_BYTES: usize = 8192;

/// Returned by [`format_grep_results`] when there is nothing to report.
pub const NO_MATCHES: &str = "No matches found";

/// Extensions (lowercase, sorted) of files that are text: source code, markup,
/// configuration and data formats.
const TEXT_EXTENSIONS: &[&str] = &[
    "adoc",
    "bash",
    "bat",
    "c",
    "cc",
    "cfg",
    "cjs",
    "clj",
    "cmake",
    "conf",
    "cpp",
    "cs",
    "css",
    "csv",
    "cxx",
    "dart",
    "diff",
    "dockerfile",
    "el",
    "env",
    "erl",
    "ex",
    "exs",
    "fish",
    "gitattributes",
    "gitignore",
    "go",
    "gradle",
    "graphql",
    "groovy",
    "h",
    "hcl",
    "hpp",
    "hs",
    "htm",
    "html",
    "ini",
    "java",
    "jl",
    "js",
    "json",
    "json5",
    "jsonc",
    "jsonl",
    "jsx",
    "kt",
    "kts",
    "less",
    "lock",
    "log",
    "lua",
    "md",
    "mdx",
    "mjs",
    "mk",
    "ml",
    "nix",
    "org",
    "patch",
    "php",
    "pl",
    "pm",
    "properties",
    "proto",
    "ps1",
    "py",
    "pyi",
    "r",
    "rb",
    "rs",
    "rst",
    "sass",
    "sbt",
    "scala",
    "scss",
    "sh",
    "sql",
    "svelte",
    "svg",
    "swift",
    "tex",
    "tf",
    "tfvars",
    "toml",
    "ts",
    "tsv",
    "tsx",
    "txt",
    "vim",
    "vue",
    "xhtml",
    "xml",
    "yaml",
    "yml",
    "zig",
    "zsh",
];

/// Extensions (lowercase, sorted) of files that are binary: images, audio,
/// video, archives, compiled objects, fonts, office documents and databases.
const BINARY_EXTENSIONS: &[&str] = &[
    "7z", "a", "apk", "avi", "avif", "bin", "bmp", "bz2", "class", "db", "deb", "dll", "dmg",
    "doc", "docx", "dylib", "ear", "eot", "exe", "flac", "gif", "gz", "heic", "ico", "iso", "jar",
    "jpeg", "jpg", "lib", "lz4", "m4a", "mkv", "mov", "mp3", "mp4", "msi", "o", "obj", "ogg",
    "otf", "parquet", "pdf", "png", "ppt", "pptx", "psd", "pyc", "pyd", "pyo", "rar", "rlib",
    "rpm", "so", "sqlite", "sqlite3", "tar", "tgz", "tif", "tiff", "ttf", "war", "wasm", "wav",
    "webm", "webp", "whl", "woff", "woff2", "xls", "xlsx", "xz", "zip", "zst",
];

/// Formats lines `cat -n` style: each line as `{n:>6}\t{line}`, numbered from
/// `start_line`, joined by `\n` with no trailing newline.
///
/// A line longer than [`MAX_LINE_LENGTH`] characters is split into chunks of
/// that many characters (never inside a UTF-8 character); the first chunk is
/// labelled with the line number (`5`) and the rest with continuation labels
/// (`5.1`, `5.2`, …), right-aligned the same way. This is deepagents'
/// `format_content_with_line_numbers`, so models trained on its output read
/// ours the same way. The lines must not contain their terminators.
pub fn format_lines_numbered<'a>(
    lines: impl IntoIterator<Item = &'a str>,
    start_line: u64,
) -> String {
    let mut out = String::new();
    let mut line_num = start_line;
    for line in lines {
        push_numbered_line(&mut out, line_num, line);
        line_num = line_num.saturating_add(1);
    }
    out
}

/// Pushes one logical line as one or more rows (see [`format_lines_numbered`]).
fn push_numbered_line(out: &mut String, line_num: u64, line: &str) {
    for (chunk_idx, chunk) in rows(line) {
        if chunk_idx == 0 {
            push_row(out, line_num, chunk);
        } else {
            push_row(out, format!("{line_num}.{chunk_idx}"), chunk);
        }
    }
}

/// The rows one logical line is shown as: its continuation index (0 for the
/// first row) and text, cut every [`MAX_LINE_LENGTH`] characters.
fn rows(line: &str) -> impl Iterator<Item = (u64, &str)> {
    let mut rest = line;
    let mut chunk_idx: u64 = 0;
    std::iter::from_fn(move || {
        if chunk_idx > 0 && rest.is_empty() {
            return None;
        }
        // A line of at most MAX_LINE_LENGTH bytes has at most that many chars.
        let end = if rest.len() <= MAX_LINE_LENGTH {
            rest.len()
        } else {
            rest.char_indices()
                .nth(MAX_LINE_LENGTH)
                .map_or(rest.len(), |(i, _)| i)
        };
        let (chunk, tail) = rest.split_at(end);
        rest = tail;
        chunk_idx += 1;
        Some((chunk_idx - 1, chunk))
    })
}

/// Bytes [`format_lines_numbered`] spends on one line numbered `line_num`
/// (all its rows, without the `\n` that precedes it after another line), so
/// a caller can bound an answer before building it.
pub fn numbered_line_len(line_num: u64, line: &str) -> usize {
    let digits = |n: u64| n.checked_ilog10().map_or(1, |d| d as usize + 1);
    rows(line)
        .map(|(chunk_idx, chunk)| {
            let label = match chunk_idx {
                0 => digits(line_num),
                i => digits(line_num) + 1 + digits(i),
            };
            // Row separator, label padded to the column, tab, text.
            usize::from(chunk_idx > 0) + label.max(LINE_NUMBER_WIDTH) + 1 + chunk.len()
        })
        .sum()
}

/// Pushes one `{label:>6}\t{text}` row, preceded by `\n` unless it is the first.
fn push_row(out: &mut String, label: impl Display, text: &str) {
    // Every row contains a tab, so an empty buffer means "first row".
    if !out.is_empty() {
        out.push('\n');
    }
    // Writing into a String cannot fail.
    let _ = write!(out, "{label:>LINE_NUMBER_WIDTH$}\t{text}");
}

/// Numbers a whole file's content `cat -n` style starting at `start_line`
/// (see [`format_lines_numbered`]), after splitting it with [`split_lines`]:
/// a final newline adds no empty row and `\r\n` endings show without the `\r`.
pub fn format_content_with_line_numbers(content: &str, start_line: u64) -> String {
    format_lines_numbered(split_lines(content), start_line)
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

/// Returns [`EMPTY_CONTENT_WARNING`] when `content` is empty or only
/// whitespace, so the caller can tell the model the file exists but is blank
/// instead of returning an empty string (deepagents' `check_empty_content`).
pub fn check_empty_content(content: &str) -> Option<&'static str> {
    content.trim().is_empty().then_some(EMPTY_CONTENT_WARNING)
}

/// Returns the first `num_lines` lines of `content`, numbered from 1 like
/// [`format_content_with_line_numbers`], for showing a short preview of a
/// large file or result.
pub fn extract_preview(content: &str, num_lines: usize) -> String {
    format_lines_numbered(content.lines().take(num_lines), 1)
}

/// Formats a byte count for humans with 1024-based units: `"512 B"` below
/// 1 KiB, otherwise one decimal and `KB`, `MB`, `GB`, `TB`, `PB` or `EB`
/// (`"1.5 KB"`, `"2.3 MB"`, `"1.0 GB"`).
///
/// The unit is chosen after rounding, so a value never shows as `1024.0` of a
/// unit: 1048575 bytes is `"1.0 MB"`, not `"1024.0 KB"`.
pub fn format_file_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KB", "MB", "GB", "TB", "PB", "EB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    // Display only: f64's 53-bit mantissa is ample for one decimal place.
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while unit + 1 < UNITS.len() && (value * 10.0).round() >= 1024.0 * 10.0 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// How grep results are rendered, mirroring the `output_mode` parameter of
/// deepagents' grep tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GrepOutputMode {
    /// Only the paths of files that matched, one per line (the default).
    #[default]
    FilesWithMatches,
    /// Every matching line as `path:line_number:line`.
    Content,
    /// The number of matching lines per file as `path:N`.
    Count,
}

impl GrepOutputMode {
    /// Parses the wire name: `"files_with_matches"`, `"content"` or
    /// `"count"`; anything else is `None` so the caller can reject it.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "files_with_matches" => Some(Self::FilesWithMatches),
            "content" => Some(Self::Content),
            "count" => Some(Self::Count),
            _ => None,
        }
    }

    /// The wire name accepted by [`GrepOutputMode::parse`].
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FilesWithMatches => "files_with_matches",
            Self::Content => "content",
            Self::Count => "count",
        }
    }
}

/// One matching line found by grep, borrowed from the search results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrepLine<'a> {
    /// Path of the file that matched.
    pub path: &'a str,
    /// 1-based number of the matching line.
    pub line_number: u64,
    /// The matching line, without its terminator.
    pub line: &'a str,
}

/// Renders grep matches for the model in the given mode:
/// [`GrepOutputMode::FilesWithMatches`] lists each path once,
/// [`GrepOutputMode::Content`] gives `path:line_number:line` per match and
/// [`GrepOutputMode::Count`] gives `path:N` per file. Files appear in the
/// order they were first seen, lines are joined by `\n`, and no matches gives
/// [`NO_MATCHES`] so the model never gets an empty answer.
pub fn format_grep_results(matches: &[GrepLine<'_>], mode: GrepOutputMode) -> String {
    if matches.is_empty() {
        return NO_MATCHES.to_owned();
    }
    let mut out = String::new();
    match mode {
        GrepOutputMode::Content => {
            for m in matches {
                if !out.is_empty() {
                    out.push('\n');
                }
                // Writing into a String cannot fail.
                let _ = write!(out, "{}:{}:{}", m.path, m.line_number, m.line);
            }
        }
        GrepOutputMode::FilesWithMatches => {
            for (path, _) in group_grep_matches(matches) {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(path);
            }
        }
        GrepOutputMode::Count => {
            for (path, lines) in group_grep_matches(matches) {
                if !out.is_empty() {
                    out.push('\n');
                }
                // Writing into a String cannot fail.
                let _ = write!(out, "{path}:{}", lines.len());
            }
        }
    }
    out
}

/// Groups grep matches by path, files in first-seen order and each file's
/// matches in input order, so per-file rendering is deterministic (a map would
/// lose the search order).
pub fn group_grep_matches<'a>(
    matches: &'a [GrepLine<'a>],
) -> Vec<(&'a str, Vec<&'a GrepLine<'a>>)> {
    let mut groups: Vec<(&'a str, Vec<&'a GrepLine<'a>>)> = Vec::new();
    let mut index: HashMap<&'a str, usize> = HashMap::new();
    for m in matches {
        let slot = *index.entry(m.path).or_insert_with(|| {
            groups.push((m.path, Vec::new()));
            groups.len() - 1
        });
        groups[slot].1.push(m);
    }
    groups
}

/// Caps a tool result at `token_limit` tokens, estimated as
/// [`CHARS_PER_TOKEN`] characters each: a longer result keeps its first
/// `token_limit * 4` characters (cut on a character boundary), then `\n` and
/// [`TRUNCATION_GUIDANCE`]. A result within the limit is returned borrowed.
/// This keeps one oversized answer from filling the model's context.
pub fn truncate_if_too_long(result: &str, token_limit: usize) -> Cow<'_, str> {
    let max_chars = token_limit.saturating_mul(CHARS_PER_TOKEN);
    // At most max_chars bytes means at most max_chars chars.
    if result.len() <= max_chars {
        return Cow::Borrowed(result);
    }
    match result.char_indices().nth(max_chars) {
        None => Cow::Borrowed(result),
        Some((cut, _)) => {
            let kept = &result[..cut];
            let mut out = String::with_capacity(kept.len() + 1 + TRUNCATION_GUIDANCE.len());
            out.push_str(kept);
            out.push('\n');
            out.push_str(TRUNCATION_GUIDANCE);
            Cow::Owned(out)
        }
    }
}

/// Makes a tool call id safe to use as a file name (large tool results are
/// saved under a name derived from it).
///
/// Like deepagents, `.`, `/` and `\` become `_`, so the id cannot climb out of
/// its directory or name another one. Beyond deepagents, control characters
/// (NUL included) also become `_`, since path validation rejects them, and an
/// empty id becomes `"_"` so the name is never empty. Length is not bounded
/// here; an id longer than a path segment may hold is rejected by path
/// validation.
pub fn sanitize_tool_call_id(id: &str) -> String {
    if id.is_empty() {
        return "_".to_owned();
    }
    id.chars()
        .map(|c| {
            if matches!(c, '.' | '/' | '\\') || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// Whether content is binary rather than text, by the heuristic git and
/// ripgrep use: a NUL byte in the first [`BINARY_SNIFF_BYTES`] bytes means
/// binary. Text in any ASCII-compatible encoding passes; UTF-16 text counts
/// as binary, as it does for git. Empty content is text.
pub fn is_binary(content: &[u8]) -> bool {
    let head = &content[..content.len().min(BINARY_SNIFF_BYTES)];
    head.contains(&0)
}

/// Whether a path looks like a text file from its name alone (the Go
/// port's `IsTextFile`): true for a known text or code extension and for names
/// without an extension (`Makefile`, `LICENSE`, `.gitignore`), false
/// otherwise, including every extension [`looks_like_binary_path`] knows.
///
/// Only a hint that costs no I/O: an unknown extension is false here and also
/// false in [`looks_like_binary_path`], so such a file, and any file whose
/// name might lie, should be decided from its content with [`is_binary`].
/// The extension is what follows the last `.` of the last segment, compared
/// ASCII case-insensitively; a leading `.` does not start an extension.
pub fn looks_like_text_path(path: &str) -> bool {
    match extension(path) {
        None => true,
        Some(ext) => contains_ignore_ascii_case(TEXT_EXTENSIONS, ext),
    }
}

/// Whether a path has a known binary extension (image, audio, video, archive,
/// compiled object, font, office document, database), so a caller can skip or
/// refuse it without reading it. The counterpart of [`looks_like_text_path`];
/// a path neither function recognises should be sniffed with [`is_binary`].
pub fn looks_like_binary_path(path: &str) -> bool {
    extension(path).is_some_and(|ext| contains_ignore_ascii_case(BINARY_EXTENSIONS, ext))
}

/// The extension of the last path segment: what follows its last `.`, unless
/// that `.` is the first character (a dotfile) or the last (no extension).
fn extension(path: &str) -> Option<&str> {
    let name = path.rsplit_once('/').map_or(path, |(_, name)| name);
    match name.rfind('.') {
        Some(0) | None => None,
        Some(dot) => {
            let ext = &name[dot + 1..];
            (!ext.is_empty()).then_some(ext)
        }
    }
}

/// Binary search of a sorted lowercase list for `ext`, ignoring ASCII case.
fn contains_ignore_ascii_case(sorted: &[&str], ext: &str) -> bool {
    sorted
        .binary_search_by(|probe| {
            probe
                .bytes()
                .cmp(ext.bytes().map(|b| b.to_ascii_lowercase()))
        })
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_lines_cat_n_style_without_trailing_newline() {
        assert_eq!(
            format_content_with_line_numbers("alpha\nbeta\n", 1),
            "     1\talpha\n     2\tbeta"
        );
        assert_eq!(
            format_content_with_line_numbers("x\n\ny", 41),
            "    41\tx\n    42\t\n    43\ty"
        );
    }

    #[test]
    fn numbering_empty_content_gives_empty_string() {
        assert_eq!(format_content_with_line_numbers("", 1), "");
        assert_eq!(format_content_with_line_numbers("\n", 1), "     1\t");
    }

    #[test]
    fn wide_line_numbers_are_not_cut() {
        assert_eq!(format_lines_numbered(["a"], 1_234_567), "1234567\ta");
    }

    #[test]
    fn long_line_is_split_with_continuation_labels() {
        let long = "a".repeat(10000) + &"b".repeat(10000) + &"c".repeat(5000);
        let out = format_lines_numbered(["first", long.as_str(), "last"], 4);
        let expected = format!(
            "     4\tfirst\n     5\t{}\n   5.1\t{}\n   5.2\t{}\n     6\tlast",
            "a".repeat(10000),
            "b".repeat(10000),
            "c".repeat(5000)
        );
        assert_eq!(out, expected);
    }

    #[test]
    fn line_of_exactly_max_length_is_not_split() {
        let line = "z".repeat(MAX_LINE_LENGTH);
        let out = format_lines_numbered([line.as_str()], 1);
        assert_eq!(out, format!("     1\t{line}"));
    }

    #[test]
    fn long_line_is_counted_in_chars_and_split_on_char_boundaries() {
        // 9999 ASCII chars then multi-byte chars: the 10000th char is 'é'
        // (2 bytes), so the first chunk ends right after it.
        let line = "a".repeat(9999) + "é" + "日本" + "🦀";
        let out = format_lines_numbered([line.as_str()], 7);
        assert_eq!(
            out,
            format!("     7\t{}é\n   7.1\t日本🦀", "a".repeat(9999))
        );

        // Over MAX_LINE_LENGTH bytes but not chars: one row.
        let wide = "日".repeat(MAX_LINE_LENGTH);
        assert_eq!(
            format_lines_numbered([wide.as_str()], 1),
            format!("     1\t{wide}")
        );
    }

    #[test]
    fn crlf_endings_are_not_displayed() {
        assert_eq!(
            format_content_with_line_numbers("one\r\ntwo\r\n", 1),
            "     1\tone\n     2\ttwo"
        );
    }

    #[test]
    fn numbered_line_len_is_the_formatted_length() {
        let long = "é".repeat(MAX_LINE_LENGTH * 2 + 3);
        for (n, line) in [
            (1, ""),
            (7, "abc"),
            (1_234_567, "x"),
            (42, long.as_str()),
            (9_999_999, long.as_str()),
        ] {
            assert_eq!(
                numbered_line_len(n, line),
                format_lines_numbered([line], n).len(),
                "line {n}"
            );
        }
    }

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
    fn preview_takes_first_lines_numbered_from_one() {
        assert_eq!(extract_preview("a\nb\nc\n", 2), "     1\ta\n     2\tb");
        assert_eq!(extract_preview("a\nb", 10), "     1\ta\n     2\tb");
        assert_eq!(extract_preview("a\nb", 0), "");
    }

    #[test]
    fn file_sizes_use_1024_based_units() {
        assert_eq!(format_file_size(0), "0 B");
        assert_eq!(format_file_size(512), "512 B");
        assert_eq!(format_file_size(1023), "1023 B");
        assert_eq!(format_file_size(1024), "1.0 KB");
        assert_eq!(format_file_size(1536), "1.5 KB");
        assert_eq!(format_file_size(1048575), "1.0 MB");
        assert_eq!(format_file_size(1048576), "1.0 MB");
        assert_eq!(format_file_size(2_411_724), "2.3 MB");
        assert_eq!(format_file_size(1 << 30), "1.0 GB");
        assert_eq!(format_file_size(u64::MAX), "16.0 EB");
    }

    #[test]
    fn grep_modes_parse_and_round_trip() {
        for mode in [
            GrepOutputMode::FilesWithMatches,
            GrepOutputMode::Content,
            GrepOutputMode::Count,
        ] {
            assert_eq!(GrepOutputMode::parse(mode.as_str()), Some(mode));
        }
        assert_eq!(GrepOutputMode::parse("Content"), None);
        assert_eq!(GrepOutputMode::parse(""), None);
        assert_eq!(GrepOutputMode::default(), GrepOutputMode::FilesWithMatches);
    }

    fn sample_matches() -> Vec<GrepLine<'static>> {
        vec![
            GrepLine {
                path: "/b.rs",
                line_number: 3,
                line: "fn b()",
            },
            GrepLine {
                path: "/a.rs",
                line_number: 1,
                line: "fn a()",
            },
            GrepLine {
                path: "/b.rs",
                line_number: 9,
                line: "b: x:y",
            },
        ]
    }

    #[test]
    fn grep_files_with_matches_lists_unique_paths_in_first_seen_order() {
        assert_eq!(
            format_grep_results(&sample_matches(), GrepOutputMode::FilesWithMatches),
            "/b.rs\n/a.rs"
        );
    }

    #[test]
    fn grep_content_lists_path_line_number_and_line() {
        assert_eq!(
            format_grep_results(&sample_matches(), GrepOutputMode::Content),
            "/b.rs:3:fn b()\n/a.rs:1:fn a()\n/b.rs:9:b: x:y"
        );
    }

    #[test]
    fn grep_count_lists_matches_per_file() {
        assert_eq!(
            format_grep_results(&sample_matches(), GrepOutputMode::Count),
            "/b.rs:2\n/a.rs:1"
        );
    }

    #[test]
    fn grep_without_matches_says_so_in_every_mode() {
        for mode in [
            GrepOutputMode::FilesWithMatches,
            GrepOutputMode::Content,
            GrepOutputMode::Count,
        ] {
            assert_eq!(format_grep_results(&[], mode), "No matches found");
        }
    }

    #[test]
    fn grouping_keeps_first_seen_file_order_and_match_order() {
        let matches = sample_matches();
        let groups = group_grep_matches(&matches);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].0, "/b.rs");
        assert_eq!(
            groups[0]
                .1
                .iter()
                .map(|m| m.line_number)
                .collect::<Vec<_>>(),
            [3, 9]
        );
        assert_eq!(groups[1].0, "/a.rs");
        assert_eq!(groups[1].1, [&matches[1]]);
    }

    #[test]
    fn short_result_is_returned_borrowed() {
        let r = truncate_if_too_long("abcd", 1);
        assert!(matches!(r, Cow::Borrowed("abcd")));
        // 4 chars but 8 bytes: still within a 1-token (4-char) budget.
        assert!(matches!(truncate_if_too_long("éééé", 1), Cow::Borrowed(_)));
    }

    #[test]
    fn long_result_is_truncated_with_guidance() {
        let r = truncate_if_too_long("abcdefghij", 2);
        assert_eq!(r, format!("abcdefgh\n{TRUNCATION_GUIDANCE}"));
    }

    #[test]
    fn truncation_cuts_on_char_boundary() {
        // Budget of 4 chars; the 4th char is a 4-byte crab.
        let r = truncate_if_too_long("ab日🦀é!", 1);
        assert_eq!(r, format!("ab日🦀\n{TRUNCATION_GUIDANCE}"));
    }

    #[test]
    fn zero_token_limit_keeps_only_guidance() {
        assert_eq!(
            truncate_if_too_long("x", 0),
            format!("\n{TRUNCATION_GUIDANCE}")
        );
        assert!(matches!(truncate_if_too_long("", 0), Cow::Borrowed("")));
    }

    #[test]
    fn default_limit_allows_eighty_thousand_chars() {
        let exact = "x".repeat(TOOL_RESULT_TOKEN_LIMIT * CHARS_PER_TOKEN);
        assert!(matches!(
            truncate_if_too_long(&exact, TOOL_RESULT_TOKEN_LIMIT),
            Cow::Borrowed(_)
        ));
        let over = exact.clone() + "y";
        assert_eq!(
            truncate_if_too_long(&over, TOOL_RESULT_TOKEN_LIMIT),
            format!("{exact}\n{TRUNCATION_GUIDANCE}")
        );
    }

    #[test]
    fn sanitizing_replaces_path_characters_and_controls() {
        assert_eq!(sanitize_tool_call_id("call_abc123"), "call_abc123");
        assert_eq!(
            sanitize_tool_call_id("../../etc/passwd"),
            "______etc_passwd"
        );
        assert_eq!(sanitize_tool_call_id("a\\b.c"), "a_b_c");
        assert_eq!(sanitize_tool_call_id("a\0b\nc\u{7f}"), "a_b_c_");
        assert_eq!(sanitize_tool_call_id("日本-id"), "日本-id");
        assert_eq!(sanitize_tool_call_id(""), "_");
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

    #[test]
    fn text_paths_are_recognised_by_extension() {
        for p in [
            "/src/main.rs",
            "/a/b.PY",
            "notes.txt",
            "/Cargo.lock",
            "/cfg/app.yaml",
            "/web/App.tsx",
            "/templates/Rust.gitignore",
            "/Makefile",
            "/.gitignore",
            "/dir.d/LICENSE",
            "/trailing.",
        ] {
            assert!(looks_like_text_path(p), "{p}");
            assert!(!looks_like_binary_path(p), "{p}");
        }
    }

    #[test]
    fn binary_paths_are_recognised_by_extension() {
        for p in [
            "/img/logo.png",
            "/a/Photo.JPG",
            "/doc.pdf",
            "/x.tar.gz",
            "/lib/libfoo.so",
            "/app.wasm",
            "/Main.class",
        ] {
            assert!(looks_like_binary_path(p), "{p}");
            assert!(!looks_like_text_path(p), "{p}");
        }
    }

    #[test]
    fn unknown_extensions_are_neither_text_nor_binary() {
        assert!(!looks_like_text_path("/data/blob.xyz"));
        assert!(!looks_like_binary_path("/data/blob.xyz"));
    }

    #[test]
    fn extension_lists_are_sorted_lowercase_and_disjoint() {
        for list in [TEXT_EXTENSIONS, BINARY_EXTENSIONS] {
            assert!(list.windows(2).all(|w| w[0] < w[1]), "{list:?}");
            assert!(list.iter().all(|e| *e == e.to_ascii_lowercase()));
        }
        assert!(
            TEXT_EXTENSIONS
                .iter()
                .all(|e| !BINARY_EXTENSIONS.contains(e))
        );
    }
}
