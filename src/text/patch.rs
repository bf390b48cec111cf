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
//! - markers may be padded with whitespace; the first line must be
//!   `*** Begin Patch` and the last `*** End Patch`; a patch with no file
//!   operation is refused;
//! - an Add File's lines all start with `+` (none: an empty file);
//! - an Update File holds at least one hunk; a hunk starts with `@@` or
//!   `@@ <line>` (the first may omit it), and its lines start with ` `
//!   (context), `-` (removed) or `+` (added); an empty line is an empty
//!   context line; `*** End of File` anchors the hunk at the file's end;
//! - a hunk's `@@ <line>` is found first, then its old lines after it;
//!   hunks are found in order, each after the one before. Lines are matched
//!   exactly if they can be, else ignoring trailing whitespace, else
//!   ignoring surrounding whitespace, else with typographic punctuation
//!   (dashes, quotes, odd spaces) read as ASCII. A hunk with no old lines
//!   appends its lines at the end of the file;
//! - the result ends with a line break; new lines take the line ending of
//!   the file's first line, untouched lines keep theirs.
//!
//! Where Codex applies part of a patch before failing, a patch here is one
//! changeset: all or nothing.
//!
//! Bounds: parsing is linear in the patch. Matching a hunk compares lines
//! from every candidate start, which repetitive text can make quadratic, so
//! the comparisons of one patch are counted and stop at
//! [`MAX_LINE_COMPARISONS`].

use crate::error::{Error, Result, echo};

/// Most line comparisons matching one file's hunks may make (about 0.1 s):
/// a hunk of a thousand identical lines against a file of a million would
/// otherwise take a billion.
pub const MAX_LINE_COMPARISONS: u64 = 20_000_000;

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

/// The hunks of an Update, from `body[*i]` up to the next file operation.
fn parse_hunks(body: &[&str], i: &mut usize) -> Result<Vec<Hunk>> {
    let mut hunks: Vec<Hunk> = Vec::new();
    while *i < body.len() && !is_operation(body[*i]) {
        let number = *i + 2;
        let header = body[*i].trim();
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
            at_end: false,
            patch_line: number,
        };
        let mut lines = 0;
        while let Some(&line) = body.get(*i) {
            if line.trim() == END_OF_FILE {
                hunk.at_end = true;
                *i += 1;
                break;
            }
            if line.trim_start().starts_with("@@") || is_operation(line) {
                break;
            }
            match line.chars().next() {
                None => {
                    hunk.old.push(String::new());
                    hunk.new.push(String::new());
                }
                Some(' ') => {
                    hunk.old.push(line[1..].to_owned());
                    hunk.new.push(line[1..].to_owned());
                }
                Some('-') => hunk.old.push(line[1..].to_owned()),
                Some('+') => hunk.new.push(line[1..].to_owned()),
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

/// Finds `wanted` in `lines` at or after `from` (at the end first when
/// `at_end`), at the strictest leniency that finds it.
fn seek(
    lines: &[&str],
    wanted: &[String],
    from: usize,
    at_end: bool,
    budget: &mut u64,
) -> Result<Option<usize>> {
    if wanted.len() > lines.len() {
        return Ok(None);
    }
    let last = lines.len() - wanted.len();
    for leniency in LENIENCIES {
        let starts = at_end.then_some(last).into_iter().chain(from..=last);
        for start in starts.filter(|s| *s >= from) {
            let mut matched = true;
            for (line, want) in lines[start..].iter().zip(wanted) {
                *budget = budget.checked_sub(1).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "matching the patch's hunks took over {MAX_LINE_COMPARISONS} line \
                         comparisons; give hunks more distinctive context"
                    ))
                })?;
                if !same_line(line, want, leniency) {
                    matched = false;
                    break;
                }
            }
            if matched {
                return Ok(Some(start));
            }
        }
    }
    Ok(None)
}

/// Applies an Update's hunks to a file's text. `Ok(Err(_))` says which hunk
/// did not match; `Err` is a bound exceeded.
pub fn apply_hunks(
    text: &str,
    hunks: &[Hunk],
) -> Result<std::result::Result<String, HunkMismatch>> {
    let (lines, endings): (Vec<&str>, Vec<&str>) = text
        .split_inclusive('\n')
        .map(|l| {
            let body = l
                .strip_suffix('\n')
                .map_or(l, |b| b.strip_suffix('\r').unwrap_or(b));
            (body, &l[body.len()..])
        })
        .unzip();
    let newline = match endings.first() {
        Some(&"\r\n") => "\r\n",
        _ => "\n",
    };
    let mut budget = MAX_LINE_COMPARISONS;
    let mut cursor = 0;
    // (start, old line count, hunk index) in file order.
    let mut placed: Vec<(usize, usize, usize)> = Vec::with_capacity(hunks.len());
    for (index, hunk) in hunks.iter().enumerate() {
        let mismatch = |missing: String, anchor: bool| HunkMismatch {
            hunk: index,
            patch_line: hunk.patch_line,
            missing,
            anchor,
        };
        if let Some(anchor) = &hunk.anchor {
            match seek(
                &lines,
                std::slice::from_ref(anchor),
                cursor,
                false,
                &mut budget,
            )? {
                Some(at) => cursor = at + 1,
                None => return Ok(Err(mismatch(anchor.clone(), true))),
            }
        }
        if hunk.old.is_empty() {
            placed.push((lines.len(), 0, index));
            continue;
        }
        // A model often ends a hunk with an empty context line the file
        // lacks at its end; try without it when the hunk does not match.
        let mut old: &[String] = &hunk.old;
        let mut found = seek(&lines, old, cursor, hunk.at_end, &mut budget)?;
        if found.is_none() && old.last().is_some_and(String::is_empty) {
            old = &old[..old.len() - 1];
            found = seek(&lines, old, cursor, hunk.at_end, &mut budget)?;
        }
        match found {
            Some(at) => {
                placed.push((at, old.len(), index));
                cursor = at + old.len();
            }
            None => return Ok(Err(mismatch(hunk.old.join("\n"), false))),
        }
    }
    // Additions-only hunks sit at the end whatever their order.
    placed.sort_by_key(|&(start, _, _)| start);
    let mut out = String::with_capacity(text.len() + 64);
    let mut copied = 0;
    let push = |out: &mut String, line: &str, ending: &str| {
        out.push_str(line);
        out.push_str(if ending.is_empty() { newline } else { ending });
    };
    for (start, count, index) in placed {
        for at in copied..start {
            push(&mut out, lines[at], endings[at]);
        }
        let new = &hunks[index].new;
        let new = if count < hunks[index].old.len() && new.last().is_some_and(String::is_empty) {
            &new[..new.len() - 1]
        } else {
            &new[..]
        };
        for line in new {
            push(&mut out, line, newline);
        }
        copied = start + count;
    }
    for at in copied..lines.len() {
        push(&mut out, lines[at], endings[at]);
    }
    Ok(Ok(out))
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
        apply_hunks(text, hunks).unwrap()
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
        let err = apply_hunks(&text, hunks).unwrap_err();
        assert!(err.to_string().contains("line comparisons"), "{err}");
    }
}
