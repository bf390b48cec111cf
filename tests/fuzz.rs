//! Property-based fuzzing (proptest) of the pure parsers hostile input reaches
//! first: logical path validation (`agentvfs::path`), the text operations
//! (`agentvfs::text`, `agentvfs::format`: line windows, edits, numbering, regex
//! windows, the apply_patch format), the configuration parser (`agentvfs::config::parse`), the
//! Watch cursor a client sends back (`agentvfs::change::ChangeCursor`), the
//! AWS credentials file parser, the object tier's path-to-key encoding
//! (`agentvfs::backend::object`), the search index's planner
//! (`agentvfs::search::index::plan`: it never excludes a true match), the
//! Grep matcher's line literal (`agentvfs::search::GrepMatcher`: it finds
//! the lines grep-regex finds) and the index's persisted form (`agentvfs::search::index::persist`: it decodes only what
//! it encoded).
//!
//! Every property checks "never panics" plus agreement with a small,
//! independently written reference (a naive model of the documented rule), so a
//! fuzz case fails on a wrong answer as well as on a crash.
//!
//! # Running
//!
//! `cargo test --release --test fuzz` runs each property `PROPTEST_CASES` times
//! (proptest's own variable; 256 when unset): about 1 s on two shared cores,
//! so CI runs it on every `scripts/test`. Longer campaigns:
//! `PROPTEST_CASES=100000 cargo test --release --test fuzz` (about 2 minutes;
//! 20,000 cases took 25 s).
//!
//! # Failing cases
//!
//! proptest shrinks a failure to a minimal input and records its seed in
//! `tests/fuzz.proptest-regressions` (created on the first failure). That file
//! is committed with the fix, so every later run replays the case first; never
//! delete a line from it, only add. A case worth keeping readable may also
//! become a plain `#[test]` in the module it exercises.

use agentvfs::backend::object::{ObjectKeys, parse_credentials};
use agentvfs::change::{ChangeCursor, LogPosition};
use agentvfs::config::{self, ConfigError};
use agentvfs::path::{self, MAX_PATH_BYTES, MAX_SEGMENT_BYTES, VfsPath};
use agentvfs::search::index::persist;
use agentvfs::search::index::segment::{Doc, Segment};
use agentvfs::text::{self, EditSpec};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use std::cmp::Ordering;

// ---------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------

/// Pieces that hit every path rule: dots, separators, controls, wildcards,
/// backslashes, multi-byte text and both sides of the segment length limit.
fn path_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "", ".", "..", "...", "a", "b", "a-b", "a.b", "a b", " ", "Ünï", "é", "日本",
            "\0", "\n", "\r", "\t", "\u{7f}", "\u{85}", "*", "?", "\\", "/", "//", "~",
            ".env", "\u{202e}", "\u{feff}",
        ])
        .prop_map(str::to_owned),
        1 => (250usize..260).prop_map(|n| "x".repeat(n)),
        1 => (84usize..87).prop_map(|n| "é".repeat(n)),
        2 => "[a-c.]{1,4}",
        1 => any::<String>(),
    ]
}

/// Raw caller input shaped like a path: pieces joined by `/`, with or without
/// a leading and trailing slash, sometimes very long.
fn raw_path() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (
            any::<bool>(),
            prop::collection::vec(path_piece(), 0..8),
            any::<bool>()
        )
            .prop_map(|(lead, pieces, trail)| {
                let mut s = if lead { "/".to_owned() } else { String::new() };
                s.push_str(&pieces.join("/"));
                if trail {
                    s.push('/');
                }
                s
            }),
        1 => (4000usize..4200, "[a/]{1,3}").prop_map(|(n, unit)| {
            let mut s = "/".to_owned();
            while s.len() < n {
                s.push_str(&unit);
            }
            s
        }),
        1 => (15000usize..17000).prop_map(|n| format!("/{}", "a/".repeat(n / 2))),
        1 => prop::collection::vec(any::<u8>(), 0..64)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        1 => any::<String>(),
    ]
}

/// A valid segment from a small alphabet, so paths share prefixes often and
/// `-`, `.` and multi-byte characters meet `/` in comparisons.
fn segment() -> impl Strategy<Value = String> {
    "[ab\\-.é~ ]{1,3}".prop_filter("not . or ..", |s| s != "." && s != "..")
}

/// A valid path of up to five segments.
fn valid_path() -> impl Strategy<Value = VfsPath> {
    prop::collection::vec(segment(), 0..5).prop_map(|segs| {
        VfsPath::parse(&format!("/{}", segs.join("/"))).expect("generated paths are valid")
    })
}

/// Text with every line-ending shape, empty and whitespace-only lines,
/// multi-byte characters and, sometimes, a line longer than
/// [`text::lines::MAX_LINE_LENGTH`].
fn text_body() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        6 => "[ab é\t]{0,6}",
        2 => prop::sample::select(vec!["\n", "\r\n", "\r", "\n\n", " \n", "\r\r\n"])
            .prop_map(str::to_owned),
        1 => (9990usize..10010, any::<bool>()).prop_map(|(n, wide)| {
            if wide { "é".repeat(n) } else { "y".repeat(n * 2) }
        }),
        1 => any::<String>(),
    ];
    prop::collection::vec(piece, 0..12).prop_map(|p| p.concat())
}

/// Edit text from a three-letter alphabet, so matches and overlaps are common.
fn edit_text() -> impl Strategy<Value = String> {
    "[abé\n]{0,24}"
}

/// A needle for [`edit_text`] (sometimes empty, which edits must refuse).
fn needle() -> impl Strategy<Value = String> {
    "[abé]{0,3}"
}

/// Small regex patterns assembled from metacharacters, classes and repetition,
/// including malformed ones.
fn small_pattern() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            "a", "b", "é", ".", "*", "+", "?", "*?", "(", ")", "(?:", "(?i)", "|", "[", "]",
            "[^a]", "^", "$", "\\", "\\d", "\\w", "\\b", "\\p{L}", "\\n", "{", "}", "{2}", "{0,3}",
            "{1000}", "-", ",", "\\x00", "(?m)", "(?s)", "\\A", "\\z",
        ]),
        0..10,
    )
    .prop_map(|p| p.concat())
}

// ---------------------------------------------------------------------------
// References
// ---------------------------------------------------------------------------

/// The path rules of `src/path.rs`'s module doc, written independently:
/// `Some(canonical)` when `raw` is accepted.
fn reference_parse(raw: &str) -> Option<String> {
    if !raw.starts_with('/')
        || raw.len() > MAX_PATH_BYTES
        || raw
            .chars()
            .any(|c| c.is_control() || matches!(c, '\\' | '*' | '?'))
    {
        return None;
    }
    if raw == "/" {
        return Some(raw.to_owned());
    }
    let body = raw.strip_suffix('/').unwrap_or(raw);
    let ok = body[1..]
        .split('/')
        .all(|s| !s.is_empty() && s != "." && s != ".." && s.len() <= MAX_SEGMENT_BYTES);
    ok.then(|| body.to_owned())
}

/// Non-overlapping occurrences of `needle`, leftmost first, by a naive scan.
fn naive_ranges(text: &str, needle: &str) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + needle.len() <= text.len() {
        if text.is_char_boundary(at) && text[at..].starts_with(needle) {
            out.push(at..at + needle.len());
            at += needle.len();
        } else {
            at += 1;
        }
    }
    out
}

/// What one edit does by the documented rules: the ranges it replaces, or
/// `None` when it must fail (empty or no-op, no match, ambiguous match).
fn reference_ranges(text: &str, e: &EditSpec<'_>) -> Option<Vec<std::ops::Range<usize>>> {
    if e.old.is_empty() || e.old == e.new {
        return None;
    }
    let ranges = naive_ranges(text, e.old);
    match ranges.len() {
        0 => None,
        1 => Some(ranges),
        _ if e.replace_all => Some(ranges),
        _ => None,
    }
}

/// Checks an error renders as `file:line: message` or `file: message`.
fn check_config_error(file: &str, source: &str, err: &ConfigError) -> Result<(), TestCaseError> {
    let shown = err.to_string();
    prop_assert_eq!(&err.file, file);
    prop_assert!(!err.message.is_empty(), "empty message: {shown:?}");
    match err.line {
        Some(line) => {
            prop_assert!(
                line >= 1 && line <= source.matches('\n').count() + 1,
                "{shown}"
            );
            prop_assert!(shown.starts_with(&format!("{file}:{line}: ")), "{shown}");
        }
        None => prop_assert!(shown.starts_with(&format!("{file}: ")), "{shown}"),
    }
    Ok(())
}

/// Checks what a parsed configuration promises: at least one mount, distinct
/// prefixes, tokens of 8+ characters without spaces, bounded output budget.
fn check_config(c: &config::Config) -> Result<(), TestCaseError> {
    prop_assert!(!c.mounts.is_empty());
    let mut prefixes: Vec<_> = c.mounts.iter().map(|m| m.prefix.clone()).collect();
    prefixes.sort();
    prefixes.dedup();
    prop_assert_eq!(prefixes.len(), c.mounts.len());
    for (token, _) in &c.principals {
        prop_assert!(token.len() >= 8 && !token.chars().any(char::is_whitespace));
    }
    prop_assert!(c.max_file_bytes >= 1 && c.max_file_bytes <= 1 << 40);
    prop_assert!(c.tools.max_output_lines >= 200 && c.tools.max_output_bytes >= 4096);
    Ok(())
}

// ---------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------

proptest! {
    // Failures go next to this file (`tests/fuzz.proptest-regressions`);
    // everything else, the case count included, comes from proptest's
    // defaults and `PROPTEST_*` variables.
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    /// `parse` accepts exactly what the rules allow, returns the canonical
    /// form (one trailing slash dropped, nothing else repaired), and the
    /// canonical form parses to itself.
    #[test]
    fn path_parse_follows_the_rules(raw in raw_path()) {
        let parsed = VfsPath::parse(&raw);
        let expected = reference_parse(&raw);
        prop_assert_eq!(parsed.as_ref().ok().map(VfsPath::as_str), expected.as_deref(), "{:?}", raw);
        if let Ok(p) = parsed {
            let s = p.as_str();
            prop_assert_eq!(VfsPath::parse(&p.to_string()).unwrap(), p.clone());
            let with_slash = format!("{s}/");
            prop_assert!(raw == s || raw == with_slash, "{:?} became {:?}", raw, s);
            prop_assert!(!s.contains("//") && (s == "/" || !s.ends_with('/')));
            for seg in p.segments() {
                prop_assert!(!seg.is_empty() && seg != "." && seg != "..");
                prop_assert!(path::check_name(seg).is_ok(), "{:?}", seg);
            }
        }
    }

    /// `join` and `parent` are inverses, `is_within` and `relative_to` agree
    /// with segment prefixes, `rebase` round-trips.
    #[test]
    fn path_join_parent_within(p in valid_path(), q in valid_path(), name in path_piece()) {
        prop_assert!(p.is_within(&p.parent()));
        prop_assert!(p.is_within(&VfsPath::root()));
        prop_assert_eq!(p.parent() == p, p.is_root());
        let joined_text = format!("{}/{name}", p.as_str().trim_end_matches('/'));
        if let Ok(j) = p.join(&name) {
            let expected = reference_parse(&joined_text);
            prop_assert_eq!(Some(j.as_str()), expected.as_deref());
            prop_assert_eq!(j.parent(), p.clone());
            prop_assert_eq!(j.name(), name.as_str());
            prop_assert!(j.is_within(&p) && !p.is_within(&j));
            prop_assert_eq!(j.relative_to(&p), Some(name.as_str()));
        } else {
            let accepted = reference_parse(&joined_text);
            prop_assert!(accepted.is_none() || name.contains('/') || name.is_empty(), "{:?} + {:?}", p, name);
        }
        let ps: Vec<&str> = p.segments().collect();
        let qs: Vec<&str> = q.segments().collect();
        prop_assert_eq!(p.is_within(&q), ps.starts_with(&qs), "{:?} within {:?}", p, q);
        match p.relative_to(&q) {
            Some(rel) => {
                prop_assert_eq!(q.join_relative(rel).unwrap(), p.clone());
                let back = p.rebase(&q, &VfsPath::root()).unwrap();
                prop_assert_eq!(back.rebase(&VfsPath::root(), &q).unwrap(), p.clone());
            }
            None => prop_assert!(!p.is_within(&q) && p.rebase(&q, &VfsPath::root()).is_none()),
        }
    }

    /// `order_key` orders paths exactly like their segment lists, and
    /// `from_order_key` inverts it.
    #[test]
    fn path_order_key_is_segment_order(p in valid_path(), q in valid_path()) {
        let by_key = p.order_key().cmp(&q.order_key());
        let ps: Vec<&[u8]> = p.segments().map(str::as_bytes).collect();
        let qs: Vec<&[u8]> = q.segments().map(str::as_bytes).collect();
        prop_assert_eq!(by_key, ps.cmp(&qs), "{:?} vs {:?}", p, q);
        prop_assert_eq!(by_key == Ordering::Equal, p == q);
        prop_assert_eq!(path::from_order_key(&p.order_key()), p.as_str());
    }

    /// Read windows never panic; line counts, the window's extent and its
    /// content agree with `str::lines`, numbered or verbatim.
    #[test]
    fn text_read_window_counts(body in text_body(), offset in 0u64..16, limit in 0u64..16, numbered: bool) {
        let lines: Vec<&str> = body.lines().collect();
        let total = lines.len() as u64;
        let got = text::read_window("/f", body.as_bytes(), offset, limit, numbered, usize::MAX);
        if offset == 0 && body.trim().is_empty() {
            let w = got.unwrap();
            prop_assert_eq!(w.content.as_str(), text::EMPTY_CONTENT_WARNING);
            prop_assert_eq!(w.lines_returned, 0);
            return Ok(());
        }
        if offset >= total {
            prop_assert!(got.is_err());
            return Ok(());
        }
        let w = got.unwrap();
        let end = if limit == 0 { total } else { total.min(offset + limit) };
        let window = &lines[offset as usize..end as usize];
        prop_assert_eq!(w.total_lines, total);
        prop_assert_eq!(w.lines_returned, window.len() as u64);
        if numbered {
            prop_assert_eq!(unnumber(&w.content, offset + 1), window.to_vec());
        } else {
            prop_assert_eq!(w.content.lines().collect::<Vec<_>>(), window.to_vec());
        }
    }

    /// Numbering never panics, even where line numbers saturate, and its rows
    /// rebuild the lines.
    #[test]
    fn format_numbering_round_trips(body in text_body(), start in prop_oneof![Just(1u64), Just(u64::MAX - 2), 0u64..1000]) {
        let numbered = text::format_lines_numbered(body.lines(), start);
        if start < u64::MAX - 100 {
            prop_assert_eq!(unnumber(&numbered, start), body.lines().collect::<Vec<_>>());
        }
        let _ = agentvfs::tools::budget::sanitize_tool_call_id(&body);
        let _ = text::decode("/f", body.as_bytes()).map(|t| t.lossy);
    }

    /// One edit agrees with `replacen`/`replace`, and fails exactly when the
    /// match count is wrong (none, or several without replace_all) or the
    /// edit is empty or a no-op.
    #[test]
    fn text_apply_edit_matches_reference(body in edit_text(), old in needle(), new in "[abéx]{0,3}", all: bool) {
        let e = EditSpec { old: &old, new: &new, replace_all: all };
        let got = text::apply_edit(&body, &e, u64::MAX);
        match reference_ranges(&body, &e) {
            None => prop_assert!(got.is_err(), "{:?} on {:?} should fail: {:?}", e, body, got.map(|g| g.0)),
            Some(ranges) => {
                let (out, n) = got.unwrap();
                let expected = if all { body.replace(&old, &new) } else { body.replacen(&old, &new, 1) };
                prop_assert_eq!(out, expected);
                prop_assert_eq!(n, ranges.len() as u64);
            }
        }
    }

    /// Several edits against the original text: the result is each match
    /// replaced in place; any failing edit, or two overlapping matches, fails
    /// the whole call naming an edit index.
    #[test]
    fn text_apply_edits_matches_reference(
        body in edit_text(),
        edits in prop::collection::vec((needle(), "[abéx]{0,3}", any::<bool>()), 0..4),
    ) {
        let specs: Vec<EditSpec<'_>> = edits
            .iter()
            .map(|(old, new, all)| EditSpec { old, new, replace_all: *all })
            .collect();
        let got = text::apply_edits(&body, &specs, u64::MAX);
        let mut plan = Vec::new();
        let mut first_bad = None;
        for (i, e) in specs.iter().enumerate() {
            match reference_ranges(&body, e) {
                Some(r) => plan.extend(r.into_iter().map(|r| (r, e.new))),
                None => {
                    first_bad = Some(i);
                    break;
                }
            }
        }
        plan.sort_by_key(|(r, _)| r.start);
        let overlaps = plan.windows(2).any(|w| w[0].0.end > w[1].0.start);
        if specs.is_empty() || first_bad.is_some() || overlaps {
            let err = got.expect_err("the reference fails this call");
            if let Some(i) = first_bad {
                prop_assert!(err.to_string().starts_with(&format!("edit {i} failed")), "{err}");
            }
        } else {
            let mut expected = String::new();
            let mut at = 0;
            for (r, new) in &plan {
                expected.push_str(&body[at..r.start]);
                expected.push_str(new);
                at = r.end;
            }
            expected.push_str(&body[at..]);
            let (out, n) = got.unwrap();
            prop_assert_eq!(out, expected);
            prop_assert_eq!(n, plan.len() as u64);
        }
    }

    /// Regex windows never panic on arbitrary small patterns; matches are
    /// pieces of the text, and without overlap they are the regex's own
    /// leftmost-first matches (when none is empty).
    #[test]
    fn text_regex_windows_never_panic(body in "[abé1 \n]{0,40}", pattern in small_pattern(), overlap in prop_oneof![0u64..4, Just(u64::MAX)]) {
        let Ok(re) = regex::Regex::new(&pattern) else {
            return Ok(());
        };
        let Ok(found) = text::regex_windows(&body, &re, overlap) else {
            return Ok(());
        };
        prop_assert!(found.len() <= text::MAX_READ_RE_MATCHES);
        for m in &found {
            prop_assert!(body.contains(m.as_str()));
        }
        let plain: Vec<&str> = re.find_iter(&body).map(|m| m.as_str()).collect();
        if overlap == 0 && !found.iter().any(String::is_empty) && !plain.iter().any(|m| m.is_empty()) {
            prop_assert_eq!(found, plain);
        }
    }

    /// Decoding arbitrary bytes never panics; strict decoding accepts exactly
    /// valid UTF-8 without a NUL in the sniffed head.
    #[test]
    fn text_decode_arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..64)) {
        let strict = text::decode_strict("/f", &data);
        let valid = std::str::from_utf8(&data).is_ok() && !data.contains(&0);
        prop_assert_eq!(strict.is_ok(), valid);
        if let Ok(t) = text::decode("/f", &data) {
            prop_assert_eq!(t.lossy, std::str::from_utf8(&data).is_err());
        }
    }

    /// A persisted search index (`search::index::persist`) decodes only
    /// what `encode` wrote: arbitrary bytes, and damaged encodings whose
    /// checksum is made right again (so the segment's and the path table's
    /// own decoders see the damage), give `Err` or an index, never a panic.
    #[test]
    fn persisted_index_decode_never_panics(
        docs in prop::collection::btree_map(
            prop::collection::vec(any::<u8>(), 1..6),
            (
                any::<u64>(),
                prop::option::of(prop::collection::vec(prop::collection::vec(any::<u32>(), 0..6), 1..3)),
            ),
            0..6,
        ),
        walked in any::<u64>(),
        noise in prop::collection::vec(any::<u8>(), 0..64),
        damage in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        prop_assert!(persist::decode(&noise).is_err());
        let docs = docs
            .into_iter()
            .map(|(key, (version, trigrams))| Doc {
                key,
                version,
                trigrams: trigrams.map(|pieces| {
                    let pieces: Vec<Vec<u32>> = pieces
                        .into_iter()
                        .map(|mut t| {
                            t.sort_unstable();
                            t.dedup();
                            t
                        })
                        .collect();
                    pieces.into()
                }),
            })
            .collect();
        let saved = persist::Saved {
            walked,
            segment: std::sync::Arc::new(Segment::build(docs)),
            table: None,
        };
        let bytes = persist::encode(&saved);
        prop_assert_eq!(persist::decode(&bytes).map(|s| s.walked), Ok(walked));
        // Magic, format and checksum come first; the checksum covers the rest.
        const HEADER: usize = 9;
        let mut bad = bytes.clone();
        for (at, byte) in damage {
            let at = HEADER + at.index(bad.len() - HEADER);
            bad[at] ^= byte | 1;
        }
        let crc = crc32fast::hash(&bad[HEADER..]).to_le_bytes();
        bad[5..HEADER].copy_from_slice(&crc);
        let _ = persist::decode(&bad);
        let _ = persist::decode(&bad[..bad.len() / 2]);
    }

    /// The configuration parser never panics on arbitrary text, and every
    /// error names the file (and the line when known).
    #[test]
    fn config_parse_arbitrary_text(source in prop_oneof![any::<String>(), "[\\[\\]a-z_=\" \n./0-9{},#é]{0,200}"]) {
        match config::parse("fuzz.toml", &source) {
            Ok(c) => check_config(&c)?,
            Err(e) => check_config_error("fuzz.toml", &source, &e)?,
        }
    }

    /// A Watch cursor decodes only from text a cursor encoded: arbitrary
    /// text, and any corruption of a real cursor, is refused with
    /// INVALID_ARGUMENT or names the same positions again, never a panic;
    /// every cursor round-trips.
    #[test]
    fn cursors_decode_only_what_was_encoded(
        positions in prop::collection::vec((valid_path(), any::<u64>(), any::<u64>()), 0..4),
        junk in any::<String>(),
        flip in any::<prop::sample::Index>(),
    ) {
        let mut cursor = ChangeCursor::default();
        for (mount, epoch, seq) in &positions {
            cursor.set(mount, LogPosition { epoch: *epoch, seq: *seq });
        }
        let text = cursor.encode();
        prop_assert_eq!(ChangeCursor::decode(&text).unwrap(), cursor.clone());
        for candidate in [junk.clone(), format!("c1.{junk}")] {
            if let Err(err) = ChangeCursor::decode(&candidate) {
                prop_assert_eq!(err.code(), "INVALID_PARAM");
            }
        }
        // One character replaced: refused, or some cursor (never a panic).
        let mut bytes = text.into_bytes();
        let at = flip.index(bytes.len());
        bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
        if let Ok(corrupt) = String::from_utf8(bytes)
            && let Err(err) = ChangeCursor::decode(&corrupt)
        {
            prop_assert_eq!(err.code(), "INVALID_PARAM");
        }
    }

    /// The AWS credentials parser never panics on arbitrary text, and finds
    /// the keys of the profile asked for in a file that holds it among
    /// others, with or without the config file's `profile ` prefix.
    #[test]
    fn credentials_files_parse(
        junk in any::<String>(),
        profile in "[a-z]{1,8}",
        other in "[a-z]{1,8}",
        key in "[A-Z0-9]{4,20}",
        secret in "[A-Za-z0-9/+]{4,40}",
        config: bool,
    ) {
        let _ = parse_credentials(&junk, &profile, config);
        let header = |name: &str| {
            if config && name != "default" {
                format!("[profile {name}]")
            } else {
                format!("[{name}]")
            }
        };
        let text = format!(
            "{}\naws_access_key_id = OTHER\naws_secret_access_key = other\n\n\
             {}\n  aws_access_key_id={key}\naws_secret_access_key = {secret}\n{junk_line}\n",
            header(&format!("{other}x")),
            header(&profile),
            junk_line = junk.replace(['\n', '[', '='], " "),
        );
        let found = parse_credentials(&text, &profile, config).expect("the profile is there");
        prop_assert_eq!(found.access_key_id, key);
        prop_assert_eq!(found.secret_access_key, secret);
    }

    /// Object keys decode to the path they encode, stay within S3's rules
    /// (no `//`, `.` or `..` segment) and sort in path order.
    #[test]
    fn object_keys_round_trip_in_path_order(p in valid_path(), q in valid_path(), prefix in "(/?[a-z.]{1,3}(/[a-z.]{1,3}){0,2}/?)?") {
        prop_assume!(config::valid_key_prefix(&prefix));
        let mount = VfsPath::parse("/m").unwrap();
        let keys = ObjectKeys::new(mount.clone(), &prefix);
        // The mount root has no head key: files only.
        let under = |p: &VfsPath| {
            let rel = p.as_str().trim_start_matches('/');
            (!rel.is_empty()).then(|| mount.join_relative(rel).ok()).flatten()
        };
        if let (Some(p), Some(q)) = (under(&p), under(&q))
            && let (Ok(kp), Ok(kq)) = (keys.head("ns", &p), keys.head("ns", &q))
        {
            prop_assert!(!kp.contains("//"), "{}", kp);
            prop_assert!(!kp.split('/').any(|s| s == "." || s == ".."), "{}", kp);
            prop_assert_eq!(keys.path("ns", &kp), Some(p.clone()));
            prop_assert_eq!(kp.cmp(&kq), p.order_key().cmp(&q.order_key()));
        }
    }

    /// The parser never panics on mutations of the shipped configurations,
    /// and what it accepts keeps the configuration's invariants.
    #[test]
    fn config_parse_mutated_examples(
        example in prop::sample::select(vec![
            include_str!("../agentvfs.example.toml"),
            include_str!("../src/default.toml"),
        ]),
        mutations in prop::collection::vec((0usize..4, any::<prop::sample::Index>(), any::<prop::sample::Index>(), config_token()), 1..5),
    ) {
        let mut source = example.to_owned();
        for (kind, a, b, token) in mutations {
            mutate(&mut source, kind, a, b, &token);
        }
        match config::parse("fuzz.toml", &source) {
            Ok(c) => check_config(&c)?,
            Err(e) => check_config_error("fuzz.toml", &source, &e)?,
        }
    }
}

/// Undoes `cat -n` numbering: checks each row's label (`n`, then `n.1`,
/// `n.2` for continuation rows) counting from `start`, and joins continuation
/// rows back into their line.
/// A file of lines from a small alphabet, so windows repeat.
fn patch_lines() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop::sample::select(vec!["a", "b", "c", " a", "a ", "", "x y", "é"])
            .prop_map(str::to_owned),
        1..20,
    )
}

/// Splices `new` over the first exact occurrence of `old` in `lines` (the
/// naive reference of one hunk whose lines match exactly), or `None`.
fn reference_splice(lines: &[String], old: &[String], new: &[String]) -> Option<Vec<String>> {
    let at =
        (0..=lines.len().checked_sub(old.len())?).find(|&i| lines[i..i + old.len()] == *old)?;
    let mut out = lines[..at].to_vec();
    out.extend_from_slice(new);
    out.extend_from_slice(&lines[at + old.len()..]);
    Some(out)
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    /// The apply_patch parser never panics; what it accepts is well formed:
    /// at least one operation, every path named, every Update with a hunk.
    #[test]
    fn patch_parse_never_panics(body in prop::collection::vec(prop::sample::select(vec![
        "*** Begin Patch", "*** End Patch", "*** Add File: a", "*** Delete File: b",
        "*** Update File: c", "*** Move to: d", "@@", "@@ ctx", " ctx", "-old", "+new", "",
        "*** End of File", "  @@", "junk", "+", "-", " ",
    ]), 0..12), raw in any::<String>()) {
        for text in [body.join("\n"), raw] {
            if let Ok(parsed) = text::patch::parse(&text) {
                prop_assert!(!parsed.operations.is_empty());
                for op in &parsed.operations {
                    prop_assert!(!op.path().is_empty());
                    if let text::patch::PatchOperation::Update { hunks, .. } = op {
                        prop_assert!(!hunks.is_empty());
                    }
                }
            }
        }
    }

    /// One hunk whose old lines are a window of the file applies as the
    /// naive splice at the first exact occurrence does (matching is exact
    /// wherever it can be before it is lenient), and the result ends with
    /// a line break.
    #[test]
    fn patch_hunk_applies_like_a_splice(lines in patch_lines(), from in 0usize..20, len in 1usize..4,
                                        new in patch_lines()) {
        let from = from % lines.len();
        let old: Vec<String> = lines[from..(from + len).min(lines.len())].to_vec();
        let mut body = String::from("*** Begin Patch\n*** Update File: f\n@@\n");
        for line in &old {
            body.push_str(&format!("-{line}\n"));
        }
        for line in new.iter().take(5) {
            body.push_str(&format!("+{line}\n"));
        }
        body.push_str("*** End Patch\n");
        let parsed = text::patch::parse(&body).unwrap();
        let text::patch::PatchOperation::Update { hunks, .. } = &parsed.operations[0] else {
            panic!("an update");
        };
        let file: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let applied = text::patch::apply_hunks(&file, hunks, &text::Costs::unbounded()).unwrap();
        let new: Vec<String> = new.into_iter().take(5).collect();
        let expected = reference_splice(&lines, &old, &new).expect("the window is in the file");
        let applied = applied.expect("an exact window matches");
        prop_assert!(applied.ends_with('\n') || applied.is_empty());
        let got: Vec<String> = applied.lines().map(str::to_owned).collect();
        prop_assert_eq!(got, expected);
    }

    /// Context lines keep the file's text however leniently they matched:
    /// a hunk of a window's lines trimmed (and typographic dashes read as
    /// ASCII) as context, then one added line, leaves every line of the
    /// file as it was, the added line among them.
    #[test]
    fn patch_context_keeps_the_file_lines(lines in patch_lines(), from in 0usize..20, len in 1usize..4) {
        let lines: Vec<String> = lines.into_iter().map(|l| l.replace('x', "\u{2014}")).collect();
        let from = from % lines.len();
        let window = &lines[from..(from + len).min(lines.len())];
        let mut body = String::from("*** Begin Patch\n*** Update File: f\n@@\n");
        for line in window {
            body.push_str(&format!(" {}\n", line.trim().replace('\u{2014}', "-")));
        }
        body.push_str("+NEW\n*** End Patch\n");
        let parsed = text::patch::parse(&body).unwrap();
        let text::patch::PatchOperation::Update { hunks, .. } = &parsed.operations[0] else {
            panic!("an update");
        };
        let file: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let applied = text::patch::apply_hunks(&file, hunks, &text::Costs::unbounded())
            .unwrap()
            .expect("the window matches, at worst leniently");
        let mut got: Vec<&str> = applied.lines().collect();
        let added = got.iter().position(|l| *l == "NEW").expect("the added line");
        got.remove(added);
        prop_assert_eq!(got, lines.iter().map(String::as_str).collect::<Vec<_>>());
    }

    /// The line index holds `split_inclusive('\n')`'s lines, and a span of
    /// `split('\n')`'s pieces is those pieces joined, on any text.
    #[test]
    fn line_offsets_agree_with_splitting(body in "[a\r\né]{0,24}", from in 0usize..30, len in 1usize..30) {
        let index = text::lines::LineIndex::new(&body).unwrap();
        let lines: Vec<&str> = body.split_inclusive('\n').collect();
        prop_assert_eq!(index.len(), lines.len());
        for (i, line) in lines.iter().enumerate() {
            prop_assert_eq!(&index[i], *line);
        }
        let pieces: Vec<&str> = body.split('\n').collect();
        let from = from % pieces.len();
        let to = (from + len).min(pieces.len());
        prop_assert_eq!(text::lines::split_span(&body, from..to), pieces[from..to].join("\n"));
    }

    /// Insert-at-line, cutting the file at one offset, makes what the
    /// reference memory tool's list of lines makes (split at `\n`, the empty
    /// tail dropped, the text inserted, joined, a final `\n` ensured).
    #[test]
    fn insert_at_line_matches_the_list_of_lines(body in "[a\r\né]{0,16}", at in -1i64..8, new in "[b\n]{0,4}") {
        let mut lines: Vec<&str> = body.split('\n').collect();
        if lines.last() == Some(&"") {
            lines.pop();
        }
        let n = lines.len();
        let got = text::insert::insert_at_line(&body, at, &new, u64::MAX, &text::Costs::unbounded()).unwrap();
        match usize::try_from(at).ok().filter(|at| *at <= n) {
            None => prop_assert_eq!(got, Err(n)),
            Some(at) => {
                let trimmed = new.trim_end_matches('\n');
                lines.insert(at, trimmed);
                let mut expected = lines.join("\n");
                if !expected.ends_with('\n') {
                    expected.push('\n');
                }
                let done = got.expect("in range");
                prop_assert_eq!(done.text, expected);
                prop_assert_eq!(done.lines, trimmed.split('\n').count());
            }
        }
    }

    /// The planner never excludes a true match: every string the pattern
    /// matches holds the trigrams its plan requires (docs/search-index.md §
    /// Exactness).
    #[test]
    fn index_plan_never_excludes_a_match(pattern in index_pattern(), ci: bool, text in index_text()) {
        check_plan(&pattern, false, ci, &text)?;
        // The same pieces as a fixed string, and the text's own pieces as
        // patterns (so some match for sure).
        check_plan(&pattern, true, ci, &text)?;
        if text.len() >= 3 {
            let cut = text.char_indices().nth(text.chars().count() / 2).map_or(0, |(i, _)| i);
            check_plan(&text[cut..], true, ci, &text)?;
            check_plan(&text[..cut], false, ci, &text)?;
        }
    }

    /// A Grep's matcher finds candidate lines by the longest literal every
    /// match holds (`agentvfs::search::GrepMatcher`); grep-searcher then
    /// reports exactly the lines grep-regex's own matcher reports, for random
    /// patterns, patterns ending in a piece of the text (so their literal is
    /// searched for and found) or in an optional one, `-i`, and many-line
    /// haystacks.
    #[test]
    fn line_literal_finds_what_the_regex_finds(
        prefix in index_pattern(),
        lines in prop::collection::vec(index_text(), 1..6),
        pick in any::<prop::sample::Index>(),
        ci: bool,
    ) {
        let haystack = lines.join("\n");
        check_line_literal(&prefix, ci, &haystack)?;
        let line = pick.get(&lines);
        let chars: Vec<char> = line.chars().collect();
        if chars.len() >= 4 {
            let start = pick.index(chars.len() - 3);
            let piece: String = chars[start..].iter().take(6).collect();
            let piece = regex::escape(&piece);
            check_line_literal(&format!("{prefix}{piece}"), ci, &haystack)?;
            check_line_literal(&format!("[0-9a-z]{piece}"), ci, &haystack)?;
            // Optional pieces hold no required literal.
            check_line_literal(&format!("[0-9a-z](?:{piece})?"), ci, &haystack)?;
            check_line_literal(&format!("[0-9a-z](?:{piece})*"), ci, &haystack)?;
        }
    }
}

/// Checks that grep-searcher reports the same lines of `haystack` for
/// `pattern` with agentvfs's Grep matcher as with grep-regex's.
fn check_line_literal(pattern: &str, ci: bool, haystack: &str) -> Result<(), TestCaseError> {
    use agentvfs::search::GrepMatcher;
    use agentvfs::search::index::plan;
    let Ok(regex) = grep_regex::RegexMatcherBuilder::new()
        .case_insensitive(ci)
        .line_terminator(Some(b'\n'))
        .build(pattern)
    else {
        return Ok(());
    };
    let ours = GrepMatcher::new(regex.clone(), plan::parse(pattern, false, ci).as_ref());
    let expected = matching_lines(&regex, haystack);
    let got = matching_lines(&ours, haystack);
    prop_assert_eq!(
        got,
        expected,
        "{:?} (-i {}, line literal {:?}) in {:?}",
        pattern,
        ci,
        ours.line_literal().map(String::from_utf8_lossy),
        haystack
    );
    Ok(())
}

/// The lines grep-searcher reports for `matcher` in `haystack`, numbered.
fn matching_lines(matcher: &impl grep_matcher::Matcher, haystack: &str) -> Vec<(u64, Vec<u8>)> {
    let mut found = Vec::new();
    let sink = grep_searcher::sinks::Bytes(|number, line| {
        found.push((number, line.to_vec()));
        Ok(true)
    });
    grep_searcher::Searcher::new()
        .search_slice(matcher, haystack.as_bytes(), sink)
        .expect("an in-memory search cannot fail");
    found
}

fn unnumber(content: &str, start: u64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    if content.is_empty() {
        return lines;
    }
    let mut next = start;
    let mut chunk = 0u64;
    for row in content.split('\n') {
        let (label, rest) = row.split_once('\t').expect("every row has a tab");
        let label = label.trim_start();
        if label == next.to_string() {
            lines.push(rest.to_owned());
            next += 1;
            chunk = 0;
        } else {
            chunk += 1;
            assert_eq!(label, format!("{}.{chunk}", next - 1), "row {row:?}");
            lines.last_mut().expect("a line to continue").push_str(rest);
        }
    }
    lines
}

/// TOML fragments a mutation inserts: structure, every key, hostile values.
fn config_token() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "\n",
            "\"",
            "'",
            "=",
            "[",
            "]",
            "[[mount]]\n",
            "[[principal]]\n",
            "[state]\n",
            "[tools]\n",
            "#",
            "{",
            "}",
            ",",
            "é",
            "\0",
            "\r\n",
            "\t",
            "..",
            "/",
            "\\",
            "prefix = \"/x\"\n",
            "prefix = \"rel\"\n",
            "prefix = \"/a/../b\"\n",
            "tier = \"store\"\n",
            "tier = \"filesystem\"\n",
            "tier = \"cloud\"\n",
            "path = \"p\"\n",
            "root = \".\"\n",
            "sync = true\n",
            "token = \"short\"\n",
            "token = \"change-me\"\n",
            "namespace = \"bad ns\"\n",
            "name = \"n\"\n",
            "grants = [{ prefix = \"/\", ops = [\"write\", \"nope\"] }]\n",
            "max_file_bytes = 0\n",
            "max_file_bytes = 99999999999999999999\n",
            "max_output_lines = 1\n",
            "max_output_bytes = -1\n",
            "listen = \"nowhere\"\n",
            "listen = \"[::1]:0\"\n",
            "idle_ttl_seconds = 18446744073709551615\n",
        ])
        .prop_map(str::to_owned),
        "[ -~]{0,12}",
    ]
}

/// Applies one mutation to `source`: delete a range, insert a token,
/// duplicate a line, or swap two lines (positions on char boundaries).
fn mutate(
    source: &mut String,
    kind: usize,
    a: prop::sample::Index,
    b: prop::sample::Index,
    token: &str,
) {
    let boundary = |i: prop::sample::Index, s: &str| {
        let mut at = i.index(s.len() + 1);
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    match kind {
        0 => {
            let (x, y) = (boundary(a, source), boundary(b, source));
            let (x, y) = (x.min(y), x.max(y).min(x.min(y) + 40));
            let y = (y..=source.len())
                .find(|&i| source.is_char_boundary(i))
                .unwrap_or(source.len());
            source.replace_range(x..y, "");
        }
        1 => {
            let at = boundary(a, source);
            source.insert_str(at, token);
        }
        _ => {
            let mut lines: Vec<String> = source.split('\n').map(str::to_owned).collect();
            let (i, j) = (a.index(lines.len()), b.index(lines.len()));
            if kind == 2 {
                let copy = lines[i].clone();
                lines.insert(j, copy);
            } else {
                lines.swap(i, j);
            }
            *source = lines.join("\n");
        }
    }
}

// ---------------------------------------------------------------------------
// The search index's planner (src/search/index/plan.rs)
// ---------------------------------------------------------------------------

/// Pattern pieces over a small alphabet, so random text matches often:
/// literals in both cases, non-ASCII letters with case variants (the Kelvin
/// sign folds to k), classes small and large, alternation, repetition and
/// zero-width assertions; malformed combinations too.
fn index_pattern() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            "a",
            "b",
            "c",
            "ab",
            "abc",
            "B",
            "AbC",
            "k",
            "K",
            "é",
            "É",
            "ß",
            ".",
            "*",
            "+",
            "?",
            "(",
            ")",
            "(?:",
            "(?i)",
            "(?-i)",
            "|",
            "[ab]",
            "[a-c]",
            "[^a]",
            "[a-z]",
            "[a-z_]",
            "[A-Z_]+",
            "[a-zé]",
            "[α-ω]",
            "[Kk]",
            "\\w",
            "\\d",
            "\\s",
            "\\b",
            "^",
            "$",
            "{2}",
            "{1,3}",
            "{0,2}",
            "{3,}",
            "\\x41",
            "(?-u:\\xE9)",
        ]),
        1..10,
    )
    .prop_map(|p| p.concat())
}

/// Text lines over the same alphabet.
fn index_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            "a", "b", "c", "A", "B", "C", "k", "K", "\u{212A}", "é", "É", "ß", "ẞ", " ", "1", "_",
            "z", "\t", "\u{A0}", "\u{3000}", "α", "λ", "ω",
        ]),
        0..40,
    )
    .prop_map(|p| p.concat())
}

/// Checks that every match of `pattern` in `text` satisfies its plan.
fn check_plan(pattern: &str, literal: bool, ci: bool, text: &str) -> Result<(), TestCaseError> {
    use agentvfs::search::index::{plan, trigram};
    let query = plan::plan(pattern, literal, ci);
    let source = if literal {
        regex::escape(pattern)
    } else {
        pattern.to_owned()
    };
    let Ok(re) = regex::bytes::RegexBuilder::new(&source)
        .case_insensitive(ci)
        .build()
    else {
        return Ok(());
    };
    for m in re.find_iter(text.as_bytes()) {
        let trigrams = trigram::extract(m.as_bytes()).unwrap_or_default();
        prop_assert!(
            query.matches_file(&trigrams),
            "{pattern:?} (literal {literal}, -i {ci}) matched {:?} in {text:?}, which the plan {query:?} excludes",
            String::from_utf8_lossy(m.as_bytes())
        );
    }
    Ok(())
}
