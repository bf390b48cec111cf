//! OpenAI's apply_patch format (V4A): parsing a patch, and applying an
//! Update's hunks to a file's text. Pure functions; the ApplyPatch tool
//! turns a parsed patch into one changeset (docs/changesets.md § apply_patch).
//!
//! ```text
//! *** Begin Patch
//! *** Add File: notes/new.md
//! +first line
//! *** Update File: src/app.py
//! *** Move to: src/main.py
//! @@ def greet():
//! -    print("hi")
//! +    print("hello")
//! *** Delete File: old.txt
//! *** End Patch
//! ```
//!
//! The grammar and the matching follow what Codex's `apply_patch` does,
//! checked case by case against it (tests/it/apply_patch.rs runs the real
//! Codex binary on the same patches):
//!
//! - markers may be padded with whitespace (a hunk's `@@` only after it);
//!   the first line must be
//!   `*** Begin Patch` and the last `*** End Patch`; a patch with no file
//!   operation is refused;
//! - an Add File's lines all start with `+` (none: an empty file);
//! - an Update File holds at least one hunk; a hunk starts with `@@` or
//!   `@@ <line>` (the first may omit it), and its lines start with ` `
//!   (context), `-` (removed) or `+` (added); an empty line is an empty
//!   context line (so is a line starting with whitespace, even ` @@`);
//!   `*** End of File` says the hunk's old lines end the file;
//! - a hunk's `@@ <line>` is found first, then its old lines after it;
//!   hunks are found in order, each after the one before. Lines are matched
//!   exactly if they can be, else ignoring trailing whitespace, else
//!   ignoring surrounding whitespace, else with typographic punctuation
//!   (dashes, quotes, odd spaces) read as ASCII. A hunk with no old lines
//!   appends its lines at the end of the file;
//! - a context line keeps the file's text where it matched only leniently
//!   (as Codex does: only `-` lines go and `+` lines come);
//! - the result ends with a line break; new lines take the line ending of
//!   the file's first line, untouched lines keep theirs.
//!
//! Where Codex applies part of a patch before failing, a patch here is one
//! changeset: all or nothing.
//!
//! Bounds: parsing is linear in the patch. Matching a hunk compares lines
//! from every candidate start, which repetitive text can make quadratic, so
//! the bytes the matching of one file's hunks reads are counted (each line
//! compared, in the file and in the patch, and each line stepped over) and
//! it stops at [`match_budget`], asking its caller's deadline every
//! [`CHECK_EVERY_BYTES`]. The file is walked by byte offsets: nothing is
//! held per line of it, and the new text is sized and charged before it is
//! built.

use super::Costs;
use crate::error::{Error, Result, echo};

/// Bytes matching one file's hunks may read beyond [`MATCH_READS_OF_FILE`]
/// readings of the file (a fraction of a second in all): a hunk of a
/// thousand long, nearly identical lines against a file of a million would
/// otherwise read terabytes.
pub const MAX_MATCH_BYTES: u64 = 256 << 20;

/// How many times matching may read the whole file on top of
/// [`MAX_MATCH_BYTES`]: a hunk found, or not, by one pass at each leniency
/// reads it about twice a pass.
pub const MATCH_READS_OF_FILE: u64 = 8;

/// The most bytes matching hunks against a file of `file_bytes` may read.
pub fn match_budget(file_bytes: usize) -> u64 {
    MAX_MATCH_BYTES.saturating_add(MATCH_READS_OF_FILE.saturating_mul(file_bytes as u64))
}

/// How many bytes of matching go by between two looks at the deadline.
pub const CHECK_EVERY_BYTES: u64 = 1 << 20;

/// A parsed patch: its file operations, in the order written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Patch {
    /// The file operations; never empty.
    pub operations: Vec<PatchOperation>,
}

/// One file operation of a patch. Paths are as written in the patch; the
/// caller resolves them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PatchOperation {
    /// `*** Add File:` creates (or replaces) a file with `content`.
    Add {
        /// The file's path.
        path: String,
        /// The whole new content, each line ending in `\n`.
        content: String,
    },
    /// `*** Delete File:` deletes a file.
    Delete {
        /// The file's path.
        path: String,
    },
    /// `*** Update File:` changes a file by hunks, and may move it.
    Update {
        /// The file's path.
        path: String,
        /// `*** Move to:`: where the updated file goes.
        move_to: Option<String>,
        /// The changes, in file order; never empty.
        hunks: Vec<Hunk>,
    },
}

impl PatchOperation {
    /// The path the operation names first (an Update's source).
    pub fn path(&self) -> &str {
        match self {
            Self::Add { path, .. } | Self::Delete { path } | Self::Update { path, .. } => path,
        }
    }
}

/// One `@@` hunk of an Update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hunk {
    /// The `@@ <line>` header's line, found before the old lines.
    pub anchor: Option<String>,
    /// Lines the file must hold (context and removed), in order.
    pub old: Vec<String>,
    /// Lines that replace them (context and added), in order.
    pub new: Vec<String>,
    /// For each of `new`, the index in `old` of the context line it
    /// repeats (`None`: an added line), so a context line can keep the
    /// file's text.
    pub sources: Vec<Option<usize>>,
    /// `*** End of File`: the old lines end the file.
    pub at_end: bool,
    /// Line of the patch the hunk starts on (1-based), for errors.
    pub patch_line: usize,
}

/// Why an Update's hunk could not be placed in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HunkMismatch {
    /// Which hunk of the Update (0-based).
    pub hunk: usize,
    /// Line of the patch the hunk starts on (1-based).
    pub patch_line: usize,
    /// What was not found: the anchor line, or the old lines.
    pub missing: String,
    /// True when the `@@` anchor line was the part not found.
    pub anchor: bool,
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE_TO: &str = "*** Move to: ";
const END_OF_FILE: &str = "*** End of File";

fn invalid(line: usize, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("invalid patch, line {line}: {message}"))
}

/// Bytes parsing `patch` may hold, to charge before parsing it: for each
/// of its lines a slice (16 bytes) and, in a hunk, its old and new strings
/// and its source (64), and the lines' text, copied at most twice.
pub fn parse_cost(patch: &str) -> u64 {
    let lines = super::count_lines(patch.as_bytes()) as u64 + 1;
    lines
        .saturating_mul(80)
        .saturating_add(2 * patch.len() as u64)
}

/// Parses a V4A patch. A malformed patch is INVALID_ARGUMENT naming the line
/// and what is wrong with it.
pub fn parse(patch: &str) -> Result<Patch> {
    let lines: Vec<&str> = patch.trim().lines().collect();
    if lines.first().map(|l| l.trim()) != Some(BEGIN) {
        return Err(invalid(1, format!("the first line must be '{BEGIN}'")));
    }
    if lines.len() < 2 || lines.last().map(|l| l.trim()) != Some(END) {
        return Err(invalid(
            lines.len(),
            format!("the last line must be '{END}'"),
        ));
    }
    let body = &lines[1..lines.len() - 1];
    let mut operations = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let number = i + 2;
        let line = body[i].trim();
        i += 1;
        if let Some(path) = line.strip_prefix(ADD.trim_end()) {
            let path = file_path(path, number)?;
            let mut content = String::new();
            while let Some(added) = body.get(i).and_then(|l| l.strip_prefix('+')) {
                content.push_str(added);
                content.push('\n');
                i += 1;
            }
            operations.push(PatchOperation::Add { path, content });
        } else if let Some(path) = line.strip_prefix(DELETE.trim_end()) {
            let path = file_path(path, number)?;
            operations.push(PatchOperation::Delete { path });
        } else if let Some(path) = line.strip_prefix(UPDATE.trim_end()) {
            let path = file_path(path, number)?;
            let mut move_to = None;
            if let Some(to) = body
                .get(i)
                .and_then(|l| l.trim().strip_prefix(MOVE_TO.trim_end()))
            {
                move_to = Some(file_path(to, i + 2)?);
                i += 1;
            }
            let hunks = parse_hunks(body, &mut i)?;
            if hunks.is_empty() {
                return Err(invalid(
                    number,
                    format!("the update of {:?} has no hunk", echo(&path)),
                ));
            }
            operations.push(PatchOperation::Update {
                path,
                move_to,
                hunks,
            });
        } else {
            return Err(invalid(
                number,
                format!(
                    "{:?} is not a file operation; expected '{ADD}<path>', '{DELETE}<path>' \
                     or '{UPDATE}<path>'",
                    echo(line)
                ),
            ));
        }
    }
    if operations.is_empty() {
        return Err(invalid(1, "the patch changes no file"));
    }
    Ok(Patch { operations })
}

/// The path after a file operation's marker: required, whitespace trimmed.
fn file_path(rest: &str, line: usize) -> Result<String> {
    let path = rest.trim();
    if path.is_empty() {
        return Err(invalid(line, "the file operation names no path"));
    }
    Ok(path.to_owned())
}

/// Whether a body line starts the next file operation.
fn is_operation(line: &str) -> bool {
    let line = line.trim();
    [ADD, DELETE, UPDATE]
        .iter()
        .any(|marker| line.starts_with(marker.trim_end()))
}

/// Whether a line starts a hunk: `@@` (trailing whitespace allowed) or
/// `@@ <line>`. A line with leading whitespace is a context line.
fn is_hunk_header(line: &str) -> bool {
    line.trim_end() == "@@" || line.starts_with("@@ ")
}

/// The hunks of an Update, from `body[*i]` up to the next file operation.
fn parse_hunks(body: &[&str], i: &mut usize) -> Result<Vec<Hunk>> {
    let mut hunks: Vec<Hunk> = Vec::new();
    while *i < body.len() && !is_operation(body[*i]) {
        let number = *i + 2;
        let header = body[*i].trim_end();
        let anchor = if header == "@@" {
            *i += 1;
            None
        } else if let Some(anchor) = header.strip_prefix("@@ ") {
            *i += 1;
            Some(anchor.to_owned())
        } else if hunks.is_empty() {
            None
        } else {
            return Err(invalid(
                number,
                format!("expected a hunk header '@@', found {:?}", echo(header)),
            ));
        };
        let mut hunk = Hunk {
            anchor,
            old: Vec::new(),
            new: Vec::new(),
            sources: Vec::new(),
            at_end: false,
            patch_line: number,
        };
        let mut lines = 0;
        while let Some(&line) = body.get(*i) {
            if line.trim_end() == END_OF_FILE {
                hunk.at_end = true;
                *i += 1;
                break;
            }
            if is_hunk_header(line) || is_operation(line) {
                break;
            }
            match line.chars().next() {
                None | Some(' ') => {
                    let context = line.get(1..).unwrap_or_default();
                    hunk.sources.push(Some(hunk.old.len()));
                    hunk.old.push(context.to_owned());
                    hunk.new.push(context.to_owned());
                }
                Some('-') => hunk.old.push(line[1..].to_owned()),
                Some('+') => {
                    hunk.sources.push(None);
                    hunk.new.push(line[1..].to_owned());
                }
                Some(_) => {
                    return Err(invalid(
                        *i + 2,
                        format!(
                            "{:?} in a hunk; each line starts with ' ' (context), '-' (removed) \
                             or '+' (added)",
                            echo(line)
                        ),
                    ));
                }
            }
            lines += 1;
            *i += 1;
        }
        if lines == 0 {
            return Err(invalid(number, "the hunk has no lines"));
        }
        hunks.push(hunk);
    }
    Ok(hunks)
}

/// How leniently two lines are compared, strictest first: a hunk is placed
/// at the first level where it matches anywhere.
#[derive(Clone, Copy)]
enum Leniency {
    Exact,
    TrailingSpace,
    SurroundingSpace,
    Punctuation,
}

const LENIENCIES: [Leniency; 4] = [
    Leniency::Exact,
    Leniency::TrailingSpace,
    Leniency::SurroundingSpace,
    Leniency::Punctuation,
];

/// Whether a file line matches a patch line at `leniency` (it reads at
/// most both lines whole, which is what matching is charged).
fn same_line(file: &str, patch: &str, leniency: Leniency) -> bool {
    match leniency {
        Leniency::Exact => file == patch,
        Leniency::TrailingSpace => file.trim_end() == patch.trim_end(),
        Leniency::SurroundingSpace => file.trim() == patch.trim(),
        Leniency::Punctuation => file
            .trim()
            .chars()
            .map(plain)
            .eq(patch.trim().chars().map(plain)),
    }
}

/// Typographic punctuation read as the ASCII a model types for it.
fn plain(c: char) -> char {
    match c {
        '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
        '\u{2018}'..='\u{201B}' => '\'',
        '\u{201C}'..='\u{201F}' => '"',
        '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        other => other,
    }
}

/// A line of the file: its number and the byte it starts at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct At {
    line: usize,
    byte: usize,
}

/// The line of `text` starting at byte `at`, without its terminator (`\n`,
/// or `\r\n`), and where the next line starts.
fn line_at(text: &str, at: usize) -> (&str, usize) {
    let rest = &text[at..];
    match memchr::memchr(b'\n', rest.as_bytes()) {
        Some(i) => {
            let line = &rest[..i];
            (line.strip_suffix('\r').unwrap_or(line), at + i + 1)
        }
        None => (rest, text.len()),
    }
}

/// The work matching has left: bytes it may still read, and when it next
/// asks its caller whether to go on.
struct Work<'c> {
    budget: u64,
    left: u64,
    until_check: u64,
    costs: &'c Costs<'c>,
}

impl Work<'_> {
    /// Spends what reading `bytes` bytes costs (at least one: every step
    /// counts), or refuses once the bound or the deadline is passed.
    fn spend(&mut self, bytes: usize) -> Result<()> {
        let cost = bytes as u64 + 1;
        let budget = self.budget;
        self.left = self.left.checked_sub(cost).ok_or_else(|| {
            Error::TooLarge(format!(
                "matching the patch's hunks would read over {budget} bytes of the file and the \
                 patch (the bound on matching one file); give hunks fewer, more distinctive \
                 context lines"
            ))
        })?;
        match self.until_check.checked_sub(cost) {
            Some(left) => self.until_check = left,
            None => {
                self.until_check = CHECK_EVERY_BYTES;
                (self.costs.alive)()?;
            }
        }
        Ok(())
    }

    /// The line after `from`, read.
    fn step(&mut self, text: &str, from: At) -> Result<At> {
        let (line, next) = line_at(text, from.byte);
        self.spend(line.len())?;
        Ok(At {
            line: from.line + 1,
            byte: next,
        })
    }
}

/// Finds `wanted` in the `total` lines of `text` at or after `from` (with
/// `at_end`, only where it ends the file), at the strictest leniency that
/// finds it: where it starts and the byte after its last line.
fn seek(
    text: &str,
    total: usize,
    wanted: &[String],
    from: At,
    at_end: bool,
    work: &mut Work<'_>,
) -> Result<Option<(At, usize)>> {
    if wanted.len() > total {
        return Ok(None);
    }
    let last = total - wanted.len();
    // `*** End of File`: only at the end.
    let mut first = from;
    if at_end {
        while first.line < last {
            first = work.step(text, first)?;
        }
    }
    for leniency in LENIENCIES {
        let mut start = first;
        while start.line <= last {
            let mut byte = start.byte;
            let mut matched = true;
            for want in wanted {
                let (line, next) = line_at(text, byte);
                work.spend(line.len() + want.len())?;
                if !same_line(line, want, leniency) {
                    matched = false;
                    break;
                }
                byte = next;
            }
            if matched {
                return Ok(Some((start, byte)));
            }
            start = work.step(text, start)?;
        }
    }
    Ok(None)
}

/// Where a hunk goes: its first line in the file, the byte after the lines
/// it replaces, how many they are, and which hunk.
struct Placed {
    start: At,
    end: usize,
    count: usize,
    hunk: usize,
}

/// Where text is written: a string, or a count of its bytes (to size it
/// before it is built).
trait Sink {
    fn put(&mut self, text: &str);
}

impl Sink for String {
    fn put(&mut self, text: &str) {
        self.push_str(text);
    }
}

impl Sink for usize {
    fn put(&mut self, text: &str) {
        *self += text.len();
    }
}

/// Applies an Update's hunks to a file's text. `Ok(Err(_))` says which hunk
/// did not match; `Err` is a bound exceeded, the deadline passed, or the new
/// text refused by `costs` (it is charged before it is built).
pub fn apply_hunks(
    text: &str,
    hunks: &[Hunk],
    costs: &Costs<'_>,
) -> Result<std::result::Result<String, HunkMismatch>> {
    let total = super::count_lines(text.as_bytes());
    let newline = match memchr::memchr(b'\n', text.as_bytes()) {
        Some(i) if text[..i].ends_with('\r') => "\r\n",
        _ => "\n",
    };
    let mut work = Work {
        budget: match_budget(text.len()),
        left: match_budget(text.len()),
        until_check: CHECK_EVERY_BYTES,
        costs,
    };
    let mut cursor = At { line: 0, byte: 0 };
    // In file order once sorted.
    let mut placed: Vec<Placed> = Vec::with_capacity(hunks.len());
    for (index, hunk) in hunks.iter().enumerate() {
        let mismatch = |missing: String, anchor: bool| HunkMismatch {
            hunk: index,
            patch_line: hunk.patch_line,
            missing,
            anchor,
        };
        if let Some(anchor) = &hunk.anchor {
            let wanted = std::slice::from_ref(anchor);
            match seek(text, total, wanted, cursor, false, &mut work)? {
                Some((at, end)) => {
                    cursor = At {
                        line: at.line + 1,
                        byte: end,
                    }
                }
                None => return Ok(Err(mismatch(anchor.clone(), true))),
            }
        }
        if hunk.old.is_empty() {
            let end = At {
                line: total,
                byte: text.len(),
            };
            placed.push(Placed {
                start: end,
                end: text.len(),
                count: 0,
                hunk: index,
            });
            continue;
        }
        // A model often ends a hunk with an empty context line the file
        // lacks at its end; try without it when the hunk does not match.
        let mut old: &[String] = &hunk.old;
        let mut found = seek(text, total, old, cursor, hunk.at_end, &mut work)?;
        if found.is_none() && old.last().is_some_and(String::is_empty) {
            old = &old[..old.len() - 1];
            found = seek(text, total, old, cursor, hunk.at_end, &mut work)?;
        }
        match found {
            Some((start, end)) => {
                placed.push(Placed {
                    start,
                    end,
                    count: old.len(),
                    hunk: index,
                });
                cursor = At {
                    line: start.line + old.len(),
                    byte: end,
                };
            }
            None => return Ok(Err(mismatch(hunk.old.join("\n"), false))),
        }
    }
    // Additions-only hunks sit at the end whatever their order.
    placed.sort_by_key(|p| p.start.line);
    let mut size = 0usize;
    write_patched(&mut size, text, hunks, &placed, newline);
    (costs.charge)(size as u64, "the patched file")?;
    let mut out = String::with_capacity(size);
    write_patched(&mut out, text, hunks, &placed, newline);
    Ok(Ok(out))
}

/// Writes the patched text: the file's bytes between the placed hunks as
/// they are (a last line without a break gets `newline`), and each hunk's
/// new lines ending in `newline`, its context lines in the file's own text.
fn write_patched(
    out: &mut impl Sink,
    text: &str,
    hunks: &[Hunk],
    placed: &[Placed],
    newline: &str,
) {
    let copy = |out: &mut dyn Sink, from: usize, to: usize| {
        let kept = &text[from..to];
        out.put(kept);
        if to == text.len() && !kept.is_empty() && !kept.ends_with('\n') {
            out.put(newline);
        }
    };
    let mut copied = 0;
    for p in placed {
        copy(out, copied, p.start.byte);
        let hunk = &hunks[p.hunk];
        // A hunk placed without its trailing empty context line drops it
        // from its new lines too.
        let dropped = p.count < hunk.old.len() && hunk.new.last().is_some_and(String::is_empty);
        let keep = hunk.new.len() - usize::from(dropped);
        // The file's line the walk is on (index in the hunk, byte): context
        // lines come in order, so it only moves forward.
        let mut file = (0, p.start.byte);
        for (line, source) in hunk.new.iter().zip(&hunk.sources).take(keep) {
            let body = match *source {
                Some(i) if i < p.count => {
                    while file.0 < i {
                        file = (file.0 + 1, line_at(text, file.1).1);
                    }
                    line_at(text, file.1).0
                }
                _ => line.as_str(),
            };
            out.put(body);
            out.put(newline);
        }
        copied = p.end;
    }
    copy(out, copied, text.len());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch(body: &str) -> String {
        format!("*** Begin Patch\n{body}*** End Patch\n")
    }

    fn update(text: &str, body: &str) -> std::result::Result<String, HunkMismatch> {
        let parsed = parse(&patch(&format!("*** Update File: f\n{body}"))).unwrap();
        let PatchOperation::Update { hunks, .. } = &parsed.operations[0] else {
            panic!("not an update")
        };
        apply_hunks(text, hunks, &Costs::unbounded()).unwrap()
    }

    #[test]
    fn parses_every_operation() {
        let parsed = parse(&patch(
            "*** Add File: a.txt\n+one\n+two\n*** Delete File: b.txt\n*** Update File: c.txt\n\
             *** Move to: d.txt\n@@ fn main\n ctx\n-old\n+new\n*** End of File\n",
        ))
        .unwrap();
        assert_eq!(
            parsed.operations,
            vec![
                PatchOperation::Add {
                    path: "a.txt".into(),
                    content: "one\ntwo\n".into()
                },
                PatchOperation::Delete {
                    path: "b.txt".into()
                },
                PatchOperation::Update {
                    path: "c.txt".into(),
                    move_to: Some("d.txt".into()),
                    hunks: vec![Hunk {
                        anchor: Some("fn main".into()),
                        old: vec!["ctx".into(), "old".into()],
                        new: vec!["ctx".into(), "new".into()],
                        sources: vec![Some(0), None],
                        at_end: true,
                        patch_line: 8,
                    }],
                }
            ]
        );
    }

    #[test]
    fn malformed_patches_name_their_line() {
        for (text, needle) in [
            (
                "*** Add File: a\n+x\n*** End Patch",
                "line 1: the first line",
            ),
            ("*** Begin Patch\n*** Add File: a\n+x", "the last line"),
            ("*** Begin Patch\n*** End Patch", "changes no file"),
            (
                "*** Begin Patch\nhello\n*** End Patch",
                "line 2: \"hello\" is not a file",
            ),
            (
                "*** Begin Patch\n*** Update File: f\n*** End Patch",
                "line 2: the update of \"f\" has no hunk",
            ),
            (
                "*** Begin Patch\n*** Update File: f\n@@\n?x\n*** End Patch",
                "line 4: \"?x\" in a hunk",
            ),
            (
                "*** Begin Patch\n*** Delete File:  \n*** End Patch",
                "names no path",
            ),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }

    #[test]
    fn hunks_apply_in_order_after_their_anchor() {
        let text = "def f():\n  x\ndef g():\n  x\n";
        assert_eq!(
            update(text, "@@ def g():\n-  x\n+  y\n").unwrap(),
            "def f():\n  x\ndef g():\n  y\n"
        );
        assert_eq!(
            update("a\nb\nc\nd\n", "@@ a\n-b\n+B\n@@ c\n-d\n+D\n").unwrap(),
            "a\nB\nc\nD\n"
        );
        let err = update("a\nb\nc\nd\n", "@@ c\n-d\n+D\n@@ a\n-b\n+B\n").unwrap_err();
        assert_eq!((err.hunk, err.anchor), (1, true));
    }

    #[test]
    fn lines_match_leniently_and_keep_their_endings() {
        assert_eq!(update("a  \nb\n", "-a\n+x\n").unwrap(), "x\nb\n");
        assert_eq!(update("  a\nb\n", "-a\n+x\n").unwrap(), "x\nb\n");
        assert_eq!(update("x \u{2014} y\n", "-x - y\n+z\n").unwrap(), "z\n");
        assert_eq!(
            update("a\r\nb\r\nc\r\n", "-b\n+B\n").unwrap(),
            "a\r\nB\r\nc\r\n"
        );
        assert_eq!(update("a\nb\nc", " b\n-c\n+C\n").unwrap(), "a\nb\nC\n");
    }

    #[test]
    fn additions_only_append_and_end_of_file_anchors() {
        assert_eq!(update("a\nb\n", "@@ a\n+x\n").unwrap(), "a\nb\nx\n");
        assert_eq!(
            update("a\nb\na\nb\n", " a\n-b\n+B\n*** End of File\n").unwrap(),
            "a\nb\na\nB\n"
        );
        assert_eq!(
            update("a\nb\na\nb\n", " a\n-b\n+B\n").unwrap(),
            "a\nB\na\nb\n"
        );
    }

    #[test]
    fn a_missing_hunk_is_named() {
        let err = update("a\n", "@@\n-zzz\n+B\n").unwrap_err();
        assert_eq!(
            err,
            HunkMismatch {
                hunk: 0,
                patch_line: 3,
                missing: "zzz".into(),
                anchor: false
            }
        );
    }

    #[test]
    fn repetitive_text_is_bounded() {
        let text = "a\n".repeat(200_000);
        let mut body = String::from("@@\n");
        for _ in 0..1000 {
            body.push_str(" a\n");
        }
        body.push_str("-b\n");
        let parsed = parse(&patch(&format!("*** Update File: f\n{body}"))).unwrap();
        let PatchOperation::Update { hunks, .. } = &parsed.operations[0] else {
            panic!()
        };
        let err = apply_hunks(&text, hunks, &Costs::unbounded()).unwrap_err();
        assert_eq!(err.grpc_code(), tonic::Code::ResourceExhausted);
        assert!(
            err.to_string().contains(&format!(
                "would read over {} bytes",
                match_budget(text.len())
            )),
            "{err}"
        );
    }

    #[test]
    fn long_lines_that_almost_match_are_bounded_in_bytes() {
        // Few comparisons, each of long lines that differ only at the end:
        // the bound is on the bytes read, not on the comparisons made.
        let line = "x".repeat(4096);
        let text = format!("{line}\n").repeat(5_000);
        let mut body = String::from("@@\n");
        for _ in 0..2000 {
            body.push_str(&format!(" {line}\n"));
        }
        body.push_str(&format!("-{line}y\n"));
        let parsed = parse(&patch(&format!("*** Update File: f\n{body}"))).unwrap();
        let PatchOperation::Update { hunks, .. } = &parsed.operations[0] else {
            panic!()
        };
        let err = apply_hunks(&text, hunks, &Costs::unbounded()).unwrap_err();
        assert!(err.to_string().contains("bytes of the file"), "{err}");
    }

    #[test]
    fn matching_stops_when_its_caller_must_stop() {
        let text = "a\n".repeat(1 << 20);
        let parsed = parse(&patch("*** Update File: f\n@@\n a\n-b\n")).unwrap();
        let PatchOperation::Update { hunks, .. } = &parsed.operations[0] else {
            panic!()
        };
        let stop = || Err(Error::Unavailable("deadline passed".into()));
        let costs = Costs {
            charge: Costs::unbounded().charge,
            alive: &stop,
        };
        let err = apply_hunks(&text, hunks, &costs).unwrap_err();
        assert_eq!(
            err.to_string(),
            Error::Unavailable("deadline passed".into()).to_string()
        );
    }

    #[test]
    fn the_new_text_is_charged_before_it_is_built() {
        let charged = std::cell::Cell::new(0);
        let charge = |bytes: u64, _: &str| {
            charged.set(bytes);
            Err(Error::TooLarge("no room".into()))
        };
        let costs = Costs {
            charge: &charge,
            alive: Costs::unbounded().alive,
        };
        let parsed = parse(&patch("*** Update File: f\n@@\n-b\n+BB\n")).unwrap();
        let PatchOperation::Update { hunks, .. } = &parsed.operations[0] else {
            panic!()
        };
        assert!(apply_hunks("a\nb\nc", hunks, &costs).is_err());
        assert_eq!(charged.get(), "a\nBB\nc\n".len() as u64);
    }

    #[test]
    fn leniently_matched_context_keeps_the_file_text() {
        assert_eq!(update("a  \nb\n", " a\n-b\n+B\n").unwrap(), "a  \nB\n");
        assert_eq!(update("  a\nb\n", " a\n-b\n+B\n").unwrap(), "  a\nB\n");
        assert_eq!(
            update("x \u{2014} y\nb\n", " x - y\n-b\n+B\n").unwrap(),
            "x \u{2014} y\nB\n"
        );
        // Around the changed line, context before and after.
        assert_eq!(
            update("p \nq\nr\t\n", " p\n-q\n+Q\n+Q2\n r\n").unwrap(),
            "p \nQ\nQ2\nr\t\n"
        );
    }
}
