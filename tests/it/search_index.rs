//! The search index (docs/search-index.md) against the scan, through two real
//! servers: one indexing every namespace from its first Grep
//! (`index_min_files = 0`), one with `[search] index = false`. Random trees
//! under random writes, edits, deletes and moves, interleaved with random
//! Greps (literal, regex, `-i`, globs, context, budgets) on the State and
//! Store tiers: matches and summaries must be identical every time
//! (elapsed time aside). A run of ~300 files also drives the overlay past a
//! merge. Narrowed Greps walk the index's path table, taken once and then
//! replayed from the change log over file and directory writes, deletes and
//! moves, hidden and ignored directories, and visited budgets that run out
//! in the middle of the walk.
//!
//! The Store's persisted index (docs/search-index.md § Persistence): kill -9
//! while Greps learn, merge and persist and writes go on, then Greps equal
//! to the scan's after every restart; and faults in the stored copy made
//! from outside the server (a flipped byte, caught by the checksum; a copy
//! that decodes but rules out a matching file, caught by the self-check).
//!
//! `AGENTVFS_INDEX_SOAK=N` runs N rounds instead of the default few (a longer
//! soak); `AGENTVFS_INDEX_SEED` replays one seed.

use crate::util::{Server, grep_all};
use agentvfs::pb;
use agentvfs::pb::filesystem_client::FilesystemClient;
use agentvfs::search::index::persist;
use agentvfs::search::index::segment::Segment;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tonic::transport::Channel;

const MOUNTS: &str = r#"
[[mount]]
prefix = "/"
tier = "state"

[[mount]]
prefix = "/memories"
tier = "store"
"#;

/// Words files are made of: selective ones, frequent ones, case variants,
/// non-ASCII text and a Kelvin sign (which `-i` folds to k).
const WORDS: &[&str] = &[
    "alpha",
    "beta",
    "gamma",
    "delta",
    "needle",
    "Needle",
    "NEEDLE",
    "haystack",
    "fn",
    "let",
    "kelvin",
    "\u{212A}elvin",
    "café",
    "Straße",
    "foo_bar",
    "FooBar",
    "fooBar",
    "foo",
    "bar",
    "x",
    "1234",
    "{",
    "}",
    "  ",
    "\t",
    "\u{3000}",
];

/// Patterns a Grep may use, with `literal`.
const PATTERNS: &[(&str, bool)] = &[
    ("needle", false),
    ("needle", true),
    // Mixed case as written: the index's mixed-case trigrams narrow these
    // (docs/search-index.md § Trigrams), and must not lose `fooBar` or
    // `NEEDLE` where they match.
    ("Needle", false),
    ("FooBar", true),
    ("(Foo|foo)Bar", false),
    ("[Ff]ooBar", false),
    ("haystack", false),
    ("alpha|gamma", false),
    ("fo+_bar", false),
    // Classes too large to expand narrow by their members' first and last
    // bytes (a wide space's are not ASCII): docs/search-index.md § Planner.
    (r"fn\s+[a-z_]+\s", false),
    (r"let\s+(alpha|x)", false),
    ("foo_bar", true),
    (r"\d{4}", false),
    ("kelvin", false),
    ("café", false),
    ("stra(ss|ß)e", false),
    ("a.p.a", false),
    ("let x", false),
    (r"\bbeta\b", false),
    ("{", true),
    ("delt[ab]", false),
    ("zzz_absent", false),
    (".", false),
    ("e", false),
];

const GLOBS: &[&str] = &["", "*.rs", "*.txt", "d1/**", "*.{rs,md}"];
const DIRS: &[&str] = &[
    "",
    "d1/",
    "d1/sub/",
    "d2/",
    ".hidden/",
    "node_modules/",
    "d2/deep/er/",
];
const NAMES: &[&str] = &[
    "a.rs", "b.txt", "c.md", "d.rs", ".e.txt", "f", "g.txt", "h.rs",
];

pub(super) fn random_text(rng: &mut StdRng) -> String {
    if rng.random_ratio(1, 20) {
        return "bin\0ary needle\n".to_owned();
    }
    // Now and then a file of 10-50 KiB of filler lines with a few lines of
    // words, which the index keeps as several pieces: a query must hold
    // within one of them (docs/search-index.md § Design).
    let large = rng.random_ratio(1, 25);
    let lines = if large {
        rng.random_range(700..3500)
    } else {
        rng.random_range(0..8)
    };
    let mut text = String::new();
    for _ in 0..lines {
        if large && !rng.random_ratio(1, 100) {
            text.push_str("filler of no query\n");
            continue;
        }
        for _ in 0..rng.random_range(0..6) {
            text.push_str(WORDS[rng.random_range(0..WORDS.len())]);
            text.push(' ');
        }
        text.push('\n');
    }
    text
}

pub(super) fn random_path(rng: &mut StdRng, root: &str) -> String {
    let dir = DIRS[rng.random_range(0..DIRS.len())];
    let name = NAMES[rng.random_range(0..NAMES.len())];
    let n = rng.random_range(0..4);
    format!("{root}/{dir}{n}{name}")
}

/// One of the two servers under test.
struct Side {
    fs: FilesystemClient<Channel>,
    server: Server,
}

impl Side {
    async fn start(config: &str) -> Side {
        let server = Server::start_with(Some(&format!("{config}\n{MOUNTS}")), &[]);
        Side {
            fs: server.fs().await,
            server,
        }
    }
}

/// The outcome of a change: its status code only (versions differ by
/// nothing here, but messages name nothing random either).
pub(super) async fn change(fs: &mut FilesystemClient<Channel>, op: &Op) -> tonic::Code {
    let result = match op {
        Op::Write(path, text) => fs
            .write(pb::WriteRequest {
                path: path.clone(),
                content: text.clone(),
                ..Default::default()
            })
            .await
            .map(drop),
        Op::Edit(path, old, new) => fs
            .edit(pb::EditRequest {
                path: path.clone(),
                old_string: old.clone(),
                new_string: new.clone(),
                replace_all: true,
                ..Default::default()
            })
            .await
            .map(drop),
        Op::Delete(path) => fs
            .delete(pb::DeleteRequest {
                path: path.clone(),
                recursive: true,
                ..Default::default()
            })
            .await
            .map(drop),
        Op::Move(from, to) => fs
            .r#move(pb::MoveRequest {
                source: from.clone(),
                destination: to.clone(),
                ..Default::default()
            })
            .await
            .map(drop),
    };
    match result {
        Ok(()) => tonic::Code::Ok,
        Err(status) => status.code(),
    }
}

#[derive(Debug)]
pub(super) enum Op {
    Write(String, String),
    Edit(String, String, String),
    Delete(String),
    Move(String, String),
}

pub(super) fn random_op(rng: &mut StdRng, root: &str) -> Op {
    match rng.random_range(0..10) {
        0..=4 => Op::Write(random_path(rng, root), random_text(rng)),
        5..=6 => Op::Edit(
            random_path(rng, root),
            WORDS[rng.random_range(0..WORDS.len())].to_owned(),
            WORDS[rng.random_range(0..WORDS.len())].to_owned(),
        ),
        7 => {
            let dir = DIRS[rng.random_range(0..DIRS.len())];
            let path = if rng.random_ratio(1, 3) && !dir.is_empty() {
                format!("{root}/{}", dir.trim_end_matches('/'))
            } else {
                random_path(rng, root)
            };
            Op::Delete(path)
        }
        8 if rng.random_ratio(1, 2) => {
            // A whole directory moves (to a fresh or a taken name).
            let dir = |rng: &mut StdRng| {
                let dir = DIRS[rng.random_range(1..DIRS.len())];
                format!("{root}/{}", dir.trim_end_matches('/'))
            };
            Op::Move(dir(rng), dir(rng))
        }
        _ => Op::Move(random_path(rng, root), random_path(rng, root)),
    }
}

pub(super) fn random_grep(rng: &mut StdRng, root: &str) -> pb::GrepRequest {
    let (pattern, literal) = PATTERNS[rng.random_range(0..PATTERNS.len())];
    let path = match rng.random_range(0..4) {
        0 => format!("{root}/d1"),
        1 => format!("{root}/d2/deep"),
        _ => root.to_owned(),
    };
    pb::GrepRequest {
        pattern: pattern.into(),
        path,
        glob: GLOBS[rng.random_range(0..GLOBS.len())].into(),
        literal,
        case_insensitive: rng.random_ratio(1, 3),
        max_results: [0, 0, 0, 1, 5][rng.random_range(0..5)],
        // Budgets that run out before, inside and after the runs of
        // ruled-out files a narrowed Grep passes in one step.
        max_visited: [0, 0, 0, 1, 3, 7, 40, 150, 300, 310, 330][rng.random_range(0..11)],
        include_hidden: rng.random_ratio(1, 4),
        include_ignored: rng.random_ratio(1, 4),
        before_context: rng.random_range(0..2),
        after_context: rng.random_range(0..2),
        max_count_per_file: [0, 0, 2][rng.random_range(0..3)],
        ..Default::default()
    }
}

/// Glob patterns of [`random_glob`]: every file, by extension, below a
/// directory, by a directory's name, and an alternation.
const GLOB_PATTERNS: &[&str] = &[
    "**",
    "**/*.txt",
    "*.md",
    "d1/**",
    "**/sub/*",
    "**/*.{rs,md}",
];

/// A random Glob below `root`, mostly paths only (the CLI's and the tools'
/// kind), with random budgets and rules.
pub(super) fn random_glob(rng: &mut StdRng, root: &str) -> pb::GlobRequest {
    let path = match rng.random_range(0..4) {
        0 => format!("{root}/d1"),
        _ => root.to_owned(),
    };
    pb::GlobRequest {
        pattern: GLOB_PATTERNS[rng.random_range(0..GLOB_PATTERNS.len())].into(),
        path,
        max_results: [0, 0, 0, 1, 5][rng.random_range(0..5)],
        max_visited: [0, 0, 0, 1, 3, 7, 40, 150, 300, 310, 330][rng.random_range(0..11)],
        include_hidden: rng.random_ratio(1, 4),
        include_ignored: rng.random_ratio(1, 4),
        paths_only: rng.random_ratio(3, 4),
        ..Default::default()
    }
}

/// A Glob's full answer with the elapsed time zeroed, or its error code
/// and message with the elapsed time cut out.
pub(super) async fn glob_answer(
    fs: &mut FilesystemClient<Channel>,
    req: &pb::GlobRequest,
) -> Result<(Vec<pb::FileInfo>, pb::SearchSummary), (tonic::Code, String)> {
    match crate::util::glob_entries(fs, req.clone()).await {
        Ok((entries, mut summary)) => {
            summary.elapsed_ms = 0;
            Ok((entries, summary))
        }
        Err(status) => Err(without_time(&status)),
    }
}

/// A Grep's full answer with the elapsed time zeroed, or its error code
/// and message with the elapsed time cut out.
pub(super) async fn answer(
    fs: &mut FilesystemClient<Channel>,
    req: &pb::GrepRequest,
) -> Result<(Vec<pb::GrepMatch>, pb::SearchSummary), (tonic::Code, String)> {
    match grep_all(fs, req.clone()).await {
        Ok((matches, mut summary)) => {
            summary.elapsed_ms = 0;
            Ok((matches, summary))
        }
        Err(status) => Err(without_time(&status)),
    }
}

/// A search's error code and message, the elapsed time cut out of the
/// message ("... after visiting N entries in T ms without a result ...").
fn without_time(status: &tonic::Status) -> (tonic::Code, String) {
    let message = status.message();
    let message = match (message.find(" in "), message.find(" ms ")) {
        (Some(from), Some(to)) if from < to => {
            format!("{}{}", &message[..from], &message[to + 3..])
        }
        _ => message.to_owned(),
    };
    (status.code(), message)
}

/// The seed of a differential run named `what`: `AGENTVFS_INDEX_SEED`, else
/// a random one; printed, so a failure can be replayed.
pub(super) fn seed(what: &str) -> u64 {
    let seed = match std::env::var("AGENTVFS_INDEX_SEED") {
        Ok(seed) => seed.parse().expect("AGENTVFS_INDEX_SEED is a number"),
        Err(_) => rand::random(),
    };
    eprintln!("{what} search index differential: seed {seed}");
    seed
}

/// The files a server's narrowed Greps ruled out without reading them, as
/// its logs say.
pub(super) fn skipped_files(logs: &str) -> u64 {
    logs.lines()
        .filter(|l| l.contains("search index narrowed a grep"))
        .filter_map(|l| {
            l.split("skipped=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

async fn differential(seed: u64, rounds: usize) {
    let mut indexed = Side::start("[search]\nindex = true\nindex_min_files = 0").await;
    let mut scanned = Side::start("[search]\nindex = false").await;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut greps = 0;
    let mut last = None;
    for root in ["/t", "/memories/t"] {
        // A tree large enough that the overlay is merged into a segment.
        for i in 0..300 {
            let op = Op::Write(format!("{root}/bulk/{i:03}.txt"), random_text(&mut rng));
            let a = change(&mut indexed.fs, &op).await;
            assert_eq!(a, change(&mut scanned.fs, &op).await, "seed {seed}: {op:?}");
        }
        for round in 0..rounds {
            for _ in 0..rng.random_range(1..6) {
                let op = random_op(&mut rng, root);
                let a = change(&mut indexed.fs, &op).await;
                let b = change(&mut scanned.fs, &op).await;
                assert_eq!(a, b, "seed {seed} round {round}: {op:?}");
            }
            for _ in 0..rng.random_range(1..4) {
                // Often the last Grep again: its walk's counts are reused
                // when nothing changed, and must not be after a change.
                let req = match last.take() {
                    Some(req) if rng.random_ratio(1, 2) => req,
                    _ => random_grep(&mut rng, root),
                };
                let a = answer(&mut indexed.fs, &req).await;
                let b = answer(&mut scanned.fs, &req).await;
                assert_eq!(a, b, "seed {seed} round {round}: {req:?}");
                greps += 1;
                last = Some(req);
            }
        }
    }
    assert!(greps > 0);
    // The index did narrow Greps (the comparison above is not scan vs scan).
    let logs = indexed.server.logs.lock().unwrap().clone();
    assert!(
        skipped_files(&logs) > 0,
        "seed {seed}: the index never skipped a file"
    );
    assert!(
        logs.contains("search index merged"),
        "seed {seed}: no merge ran"
    );
    for walked in [
        "path table taken",
        "path table replayed",
        "walk counts taken",
        "walk counts carried",
    ] {
        assert!(
            logs.contains(&format!("search index {walked}")),
            "seed {seed}: no {walked}"
        );
    }
    assert!(!scanned.server.logs.lock().unwrap().contains("search index"));
}

/// Indexed Grep equals the scan under random changes (State and Store).
#[tokio::test]
async fn indexed_grep_equals_the_scan_under_random_changes() {
    let rounds = std::env::var("AGENTVFS_INDEX_SOAK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let seeds: Vec<u64> = match std::env::var("AGENTVFS_INDEX_SEED") {
        Ok(seed) => vec![seed.parse().expect("AGENTVFS_INDEX_SEED is a number")],
        Err(_) => vec![rand::random()],
    };
    for seed in seeds {
        eprintln!("search index differential: seed {seed}, {rounds} rounds");
        differential(seed, rounds).await;
    }
}

/// A file of three pieces whose first holds the only match: a narrowed
/// Grep searches only that piece (docs/search-index.md § Exactness), and
/// still shows the context lines after the match, which lie in the next
/// piece, and numbers lines as the scan does.
#[tokio::test]
async fn a_grep_of_a_large_file_searched_up_to_its_last_selected_piece_equals_the_scan() {
    let mut indexed = Side::start("[search]\nindex = true\nindex_min_files = 0").await;
    let mut scanned = Side::start("[search]\nindex = false").await;
    // The needle ends the first piece: the first line ending at or past
    // 16 KiB (`trigram::PIECE_BYTES`).
    let filler = "filler of no query\n";
    let mut text = String::new();
    while text.len() + "a needle here\n".len() < 16 << 10 {
        text.push_str(filler);
    }
    text.push_str("a needle here\nafter one\nafter two\n");
    text.push_str(&filler.repeat(2_000));
    for root in ["/t", "/memories/t"] {
        for side in [&mut indexed, &mut scanned] {
            // Enough files that the learned overlay is merged into a
            // segment, which is what knows a file's pieces.
            for i in 0..300 {
                let op = Op::Write(format!("{root}/bulk/{i:03}.txt"), format!("hay {i}\n"));
                assert_eq!(change(&mut side.fs, &op).await, tonic::Code::Ok);
            }
            let op = Op::Write(format!("{root}/large.txt"), text.clone());
            assert_eq!(change(&mut side.fs, &op).await, tonic::Code::Ok);
        }
        let grep = |after_context, before_context| pb::GrepRequest {
            pattern: "needle".into(),
            path: root.into(),
            after_context,
            before_context,
            ..Default::default()
        };
        answer(&mut indexed.fs, &grep(0, 0)).await.unwrap();
        // One merge per namespace: this one's is the first or the second.
        let merges = if root == "/t" { 1 } else { 2 };
        let merged = |side: &Side| {
            let logs = side.server.logs.lock().unwrap();
            logs.matches("search index merged").count() >= merges
        };
        for _ in 0..100 {
            if merged(&indexed) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        for (after, before) in [(0, 0), (1, 0), (2, 2), (0, 3)] {
            let req = grep(after, before);
            let (matches, summary) = answer(&mut indexed.fs, &req).await.unwrap();
            assert_eq!(
                Ok((matches.clone(), summary)),
                answer(&mut scanned.fs, &req).await,
                "{root} after {after} before {before}"
            );
            assert_eq!(matches.len(), 1 + after as usize + before as usize);
        }
    }
    let logs = indexed.server.logs.lock().unwrap().clone();
    assert_eq!(logs.matches("search index merged").count(), 2, "{logs}");
}

/// The share of the index one principal may grow (`[search]
/// index_bytes_per_principal`) in the test below.
const INDEX_SHARE: u64 = 200_000;

/// The largest `bytes=` the server logged for the index of `owner`.
fn index_bytes_of(logs: &str, owner: &str) -> u64 {
    logs.lines()
        .filter(|l| l.contains("search index size") && l.contains(&format!("owner={owner} ")))
        .filter_map(|l| {
            l.split("bytes=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .max()
        .unwrap_or(0)
}

/// Attack: a principal greps a large tree again and again so the server's
/// index grows without bound. The indexes a principal's Greps made hold at
/// most its share (past it by one file's entry at most); its Greps still
/// answer exactly, and another principal's index still grows and narrows
/// its Greps.
#[tokio::test]
async fn one_principal_cannot_grow_the_index_past_its_share() {
    const GREEDY: &str = "greedy-token-001";
    const OTHER: &str = "other-token-0001";
    let grants = r#"grants = [{ prefix = "/", ops = ["list", "file", "read_file", "read_re", "write", "delete"] }]"#;
    let config = format!(
        "[search]\nindex = true\nindex_min_files = 0\nindex_bytes_per_principal = {INDEX_SHARE}\n\
         [[mount]]\nprefix = \"/\"\ntier = \"state\"\n\
         [[principal]]\nname = \"greedy\"\ntoken = \"{GREEDY}\"\nnamespace = \"g\"\n{grants}\n\
         [[principal]]\nname = \"other\"\ntoken = \"{OTHER}\"\nnamespace = \"o\"\n{grants}\n"
    );
    let server = Server::start_with(Some(&config), &[]);
    let mut fs = server.fs().await;
    let mut rng = StdRng::seed_from_u64(rand::random());
    // Greedy: 300 files of ~1,000 distinct trigrams each (~1.2 MB of index);
    // other: 300 small ones. Every seventh holds the needle.
    let mut expected = [Vec::new(), Vec::new()];
    for (side, token) in [GREEDY, OTHER].into_iter().enumerate() {
        for i in 0..300 {
            let mut text = String::new();
            let words = if side == 0 { 250 } else { 3 };
            for _ in 0..words {
                text.push_str(&format!("t{} ", rng.random::<u32>()));
            }
            if i % 7 == 0 {
                text.push_str("needle");
                expected[side].push(format!("/big/{i:03}.txt"));
            }
            let req = pb::WriteRequest {
                path: format!("/big/{i:03}.txt"),
                content: text,
                ..Default::default()
            };
            fs.write(crate::util::as_token(req, token)).await.unwrap();
        }
    }
    let grep = |token: &str| {
        let req = pb::GrepRequest {
            pattern: "needle".into(),
            path: "/big".into(),
            ..Default::default()
        };
        crate::util::as_token(req, token)
    };
    let paths = |matches: Vec<pb::GrepMatch>| -> Vec<String> {
        matches.into_iter().map(|m| m.path).collect()
    };
    for _ in 0..8 {
        let (matches, _) = grep_all(&mut fs, grep(GREEDY)).await.unwrap();
        assert_eq!(paths(matches), expected[0]);
    }
    let greedy = index_bytes_of(&server.logs.lock().unwrap(), "greedy");
    assert!(
        (INDEX_SHARE..INDEX_SHARE + 16_384).contains(&greedy),
        "greedy's index holds {greedy} bytes, its share is {INDEX_SHARE}"
    );
    for _ in 0..4 {
        let (matches, summary) = grep_all(&mut fs, grep(OTHER)).await.unwrap();
        assert_eq!(paths(matches), expected[1]);
        assert_eq!(summary.files_searched, 300);
    }
    let logs = server.logs.lock().unwrap().clone();
    let other = index_bytes_of(&logs, "other");
    assert!(other > 0 && other < INDEX_SHARE, "other's index: {other}");
    // Other's last Grep was narrowed by its index (and walked its table).
    let last = logs
        .lines()
        .rfind(|l| l.contains("search index narrowed a grep"))
        .expect("a narrowed grep");
    assert!(!last.contains("skipped=0 "), "{last}");
    assert_eq!(index_bytes_of(&logs, "greedy"), greedy);
}

/// Attack: three principals grep large trees so that their indexes,
/// each within its share, together pass what the server can hold (before
/// the server-wide bound, three principals held 1.36 GiB of indexes outside
/// the 1 GiB memory budget). The indexes of every principal hold at most
/// `[search] index_bytes` together (past it by one file's entry at most),
/// and every Grep still answers exactly.
#[tokio::test]
async fn principals_together_cannot_grow_the_indexes_past_the_servers_bound() {
    const SERVER_BOUND: u64 = 300_000;
    const TOKENS: [&str; 3] = ["first-token-0001", "second-token-001", "third-token-0001"];
    const NAMES: [&str; 3] = ["first", "second", "third"];
    let grants = r#"grants = [{ prefix = "/", ops = ["list", "file", "read_file", "read_re", "write", "delete"] }]"#;
    let mut config = format!(
        "[search]\nindex = true\nindex_min_files = 0\nindex_bytes_per_principal = {INDEX_SHARE}\n\
         index_bytes = {SERVER_BOUND}\n[[mount]]\nprefix = \"/\"\ntier = \"state\"\n"
    );
    for (name, token) in NAMES.iter().zip(TOKENS) {
        config.push_str(&format!(
            "[[principal]]\nname = \"{name}\"\ntoken = \"{token}\"\nnamespace = \"{name}\"\n{grants}\n"
        ));
    }
    let server = Server::start_with(Some(&config), &[]);
    let mut fs = server.fs().await;
    let mut rng = StdRng::seed_from_u64(rand::random());
    // Each: 300 files of ~1,000 distinct trigrams (~1.2 MB of index, far
    // past its share); every seventh holds the needle.
    let mut expected = Vec::new();
    for token in TOKENS {
        let mut paths = Vec::new();
        for i in 0..300 {
            let mut text = String::new();
            for _ in 0..250 {
                text.push_str(&format!("t{} ", rng.random::<u32>()));
            }
            if i % 7 == 0 {
                text.push_str("needle");
                paths.push(format!("/big/{i:03}.txt"));
            }
            let req = pb::WriteRequest {
                path: format!("/big/{i:03}.txt"),
                content: text,
                ..Default::default()
            };
            fs.write(crate::util::as_token(req, token)).await.unwrap();
        }
        expected.push(paths);
    }
    for round in 0..4 {
        for (token, expected) in TOKENS.iter().zip(&expected) {
            let req = pb::GrepRequest {
                pattern: "needle".into(),
                path: "/big".into(),
                ..Default::default()
            };
            let (matches, summary) = grep_all(&mut fs, crate::util::as_token(req, token))
                .await
                .unwrap();
            let paths: Vec<String> = matches.into_iter().map(|m| m.path).collect();
            assert_eq!(&paths, expected, "{token}, round {round}");
            assert_eq!(summary.files_searched, 300);
        }
    }
    let logs = server.logs.lock().unwrap().clone();
    let held: Vec<u64> = NAMES
        .iter()
        .map(|name| index_bytes_of(&logs, name))
        .collect();
    let total: u64 = held.iter().sum();
    assert!(held[0] > 0, "the first principal's index grew: {held:?}");
    assert!(
        total < SERVER_BOUND + 16_384,
        "the indexes hold {held:?} bytes together, {total}; the server's bound is {SERVER_BOUND}"
    );
}

/// The number the `n`th "search index narrowed a grep" line of `server`'s
/// log gives for `field`, once the line is there (the server logs it as
/// the Grep ends, maybe after its client has the answer).
pub(super) async fn narrowed(server: &Server, n: usize, field: &str) -> u64 {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let logs = server.logs.lock().unwrap().clone();
        let line = logs
            .lines()
            .filter(|l| l.contains("search index narrowed a grep"))
            .nth(n - 1);
        if let Some(line) = line {
            return line
                .split(&format!("{field}="))
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no {field} in {line}"));
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no narrowed grep {n}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// A Write or an Edit teaches the namespace's index what it wrote, on
/// State and on the Store: the next Grep finds the new content without
/// learning it, and rules out what cannot match without reading it
/// (docs/search-index.md § Learning in the write path).
#[tokio::test]
async fn writes_and_edits_are_learned_before_any_grep_reads_them() {
    let server = store_server(
        "index_min_files = 0
index_self_check = 0",
    );
    for (round, root) in ["/w", "/memories/w"].into_iter().enumerate() {
        writes_and_edits_are_learned(&server, root, 2 * round).await;
    }
}

/// The check of `writes_and_edits_are_learned_before_any_grep_reads_them`
/// under `root` of `server`, whose log shows `before` narrowed Greps so
/// far: after a Grep learned 40 files, a Write and an Edit are learned as
/// they commit, so the next Grep learns nothing and skips the 39 others.
pub(super) async fn writes_and_edits_are_learned(server: &Server, root: &str, before: usize) {
    let mut fs = server.fs().await;
    let write = |path: String, content: &str| pb::WriteRequest {
        path,
        content: content.into(),
        ..Default::default()
    };
    for i in 0..40 {
        let content = format!("hay {i}\n");
        fs.write(write(format!("{root}/{i:02}.txt"), &content))
            .await
            .unwrap();
    }
    let needle = pb::GrepRequest {
        pattern: "needle".into(),
        path: root.into(),
        ..Default::default()
    };
    // The first Grep learns every file.
    let (matches, _) = grep_all(&mut fs, needle.clone()).await.unwrap();
    assert!(matches.is_empty());
    assert_eq!(narrowed(server, before + 1, "learned").await, 40);
    fs.write(write(format!("{root}/new.txt"), "a needle\n"))
        .await
        .unwrap();
    let edit = pb::EditRequest {
        path: format!("{root}/07.txt"),
        old_string: "hay 7".into(),
        new_string: "hay 7 and a needle".into(),
        ..Default::default()
    };
    fs.edit(edit).await.unwrap();
    let (matches, summary) = grep_all(&mut fs, needle).await.unwrap();
    let paths: Vec<String> = matches.into_iter().map(|m| m.path).collect();
    assert_eq!(paths, [format!("{root}/07.txt"), format!("{root}/new.txt")]);
    assert_eq!(summary.files_searched, 41);
    let learned = narrowed(server, before + 2, "learned").await;
    assert_eq!(learned, 0, "{root}: learned by the writes");
    assert_eq!(narrowed(server, before + 2, "skipped").await, 39, "{root}");
}

/// A server whose Store (`/memories`, in `store/` of its working
/// directory) keeps its index across restarts, with `search` as its
/// `[search]` section.
pub(super) fn store_server(search: &str) -> Server {
    let config = format!(
        "[search]\n{search}\n\
         [[mount]]\nprefix = \"/\"\ntier = \"state\"\n\
         [[mount]]\nprefix = \"/memories\"\ntier = \"store\"\npath = \"store\"\n"
    );
    Server::start_with(Some(&config), &[])
}

/// kill -9 while Greps learn, merge and persist the Store's index and
/// writes go on: after every restart the server loads what was persisted
/// (or learns anew) and its Greps still equal the scan's.
#[tokio::test]
async fn the_persisted_store_index_survives_kill_9_and_equals_the_scan() {
    let seed: u64 = rand::random();
    eprintln!("persisted index under kill -9: seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut indexed = store_server("index_min_files = 0\nindex_self_check = 0");
    let mut scanned = Side::start("[search]\nindex = false").await;
    let mut fs = indexed.fs().await;
    let mut logs = String::new();
    let root = "/memories/t";
    for round in 0..5 {
        // Enough new files for the overlay to pass a merge each round.
        for i in 0..300 {
            let op = Op::Write(format!("{root}/r{round}/{i:03}.txt"), random_text(&mut rng));
            let a = change(&mut fs, &op).await;
            assert_eq!(a, change(&mut scanned.fs, &op).await, "seed {seed}: {op:?}");
        }
        for step in 0..6 {
            for _ in 0..rng.random_range(1..4) {
                let op = random_op(&mut rng, root);
                let a = change(&mut fs, &op).await;
                assert_eq!(a, change(&mut scanned.fs, &op).await, "seed {seed}: {op:?}");
            }
            let req = random_grep(&mut rng, root);
            let a = answer(&mut fs, &req).await;
            assert_eq!(
                a,
                answer(&mut scanned.fs, &req).await,
                "seed {seed} round {round} step {step}: {req:?}"
            );
        }
        // A Grep of the whole tree learns this round's files, so a merge and
        // a persist start; crash at a random point of them (or after).
        let learn = pb::GrepRequest {
            pattern: "needle".into(),
            path: root.into(),
            ..Default::default()
        };
        let a = answer(&mut fs, &learn).await;
        assert_eq!(a, answer(&mut scanned.fs, &learn).await, "seed {seed}");
        tokio::time::sleep(std::time::Duration::from_millis(rng.random_range(0..40))).await;
        logs.push_str(&indexed.logs.lock().unwrap());
        indexed.crash_and_restart();
        fs = indexed.fs().await;
    }
    for _ in 0..10 {
        let req = random_grep(&mut rng, root);
        let a = answer(&mut fs, &req).await;
        assert_eq!(
            a,
            answer(&mut scanned.fs, &req).await,
            "seed {seed}: {req:?}"
        );
    }
    logs.push_str(&indexed.logs.lock().unwrap());
    for step in ["search index persisted", "search index loaded"] {
        assert!(logs.contains(step), "seed {seed}: no {step}");
    }
    assert!(!logs.contains("self-check failed"), "seed {seed}");
}

/// Persisted index pieces: (RocksDB key, value).
type Pieces = Vec<(Vec<u8>, Vec<u8>)>;

/// The pieces of the Store's persisted indexes in `store` (a stopped
/// server's directory), as RocksDB keeps them, opened as another program
/// (or a failing disk) would.
fn index_pieces(store: &std::path::Path) -> (rocksdb::DB, Pieces) {
    fn max(_: &[u8], old: Option<&[u8]>, ops: &rocksdb::MergeOperands) -> Option<Vec<u8>> {
        let word = |b: &[u8]| u64::from_be_bytes(b.try_into().unwrap_or([0; 8]));
        let most = old.into_iter().chain(ops).map(word).max().unwrap_or(0);
        Some(most.to_be_bytes().to_vec())
    }
    let mut opts = rocksdb::Options::default();
    opts.set_merge_operator_associative("agentvfs.max", max);
    let cfs = rocksdb::DB::list_cf(&opts, store).unwrap();
    // Every column family with the merge operator: WAL recovery replays the
    // counters' merges into the default one.
    let descriptors = cfs
        .iter()
        .map(|name| rocksdb::ColumnFamilyDescriptor::new(name, opts.clone()));
    let db = rocksdb::DB::open_cf_descriptors(&opts, store, descriptors).unwrap();
    let pieces = db
        .iterator_cf(db.cf_handle("index").unwrap(), rocksdb::IteratorMode::Start)
        .map(|item| {
            let (k, v) = item.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect();
    (db, pieces)
}

/// Replaces every persisted index piece by `pieces`.
fn put_pieces(db: &rocksdb::DB, pieces: &[(Vec<u8>, Vec<u8>)]) {
    let cf = db.cf_handle("index").unwrap();
    let mut batch = rocksdb::WriteBatch::default();
    batch.delete_range_cf(cf, [0u8; 4], [0xff; 4]);
    for (k, v) in pieces {
        batch.put_cf(cf, k, v);
    }
    db.write(batch).unwrap();
}

/// Writes `count` files of random words under `dir`, one in seven with
/// `the needle`: answers those files' paths, and the Grep for `needle`.
pub(super) async fn needle_files(
    fs: &mut FilesystemClient<Channel>,
    dir: &str,
    count: usize,
) -> (Vec<String>, pb::GrepRequest) {
    let mut expected = Vec::new();
    for i in 0..count {
        let mut text = format!("w{} w{}\n", rand::random::<u32>(), rand::random::<u32>());
        if i % 7 == 0 {
            text.push_str("the needle\n");
            expected.push(format!("{dir}/{i:03}.txt"));
        }
        crate::util::write(fs, &format!("{dir}/{i:03}.txt"), &text).await;
    }
    let grep = pb::GrepRequest {
        pattern: "needle".into(),
        path: dir.into(),
        ..Default::default()
    };
    (expected, grep)
}

/// Greps `grep` (answering `expected`) until the Store's index of it is
/// learned, used and persisted.
async fn learn_and_persist(
    server: &Server,
    fs: &mut FilesystemClient<Channel>,
    grep: &pb::GrepRequest,
    expected: &[String],
) {
    for _ in 0..3 {
        let (matches, _) = grep_all(fs, grep.clone()).await.unwrap();
        assert_eq!(paths(matches), expected);
    }
    let persisted = "search index persisted";
    assert!(
        server
            .wait_for_log(persisted, std::time::Duration::from_secs(20))
            .await
    );
}

/// A persisted index (`bytes`) as a bug could write it: it decodes, but
/// holds no trigram of `007.txt`, so it rules that file out.
pub(super) fn without_the_victims_trigrams(bytes: &[u8]) -> Vec<u8> {
    let mut saved = persist::decode(bytes).expect("the persisted index decodes");
    let mut docs = saved.segment.docs();
    let doc = docs
        .iter_mut()
        .find(|d| d.key.ends_with(b"007.txt"))
        .expect("the victim is indexed");
    doc.trigrams = Some(Default::default());
    saved.segment = std::sync::Arc::new(Segment::build(docs));
    persist::encode(&saved)
}

/// The paths of `matches`, in order.
pub(super) fn paths(matches: Vec<pb::GrepMatch>) -> Vec<String> {
    matches.into_iter().map(|m| m.path).collect()
}

/// Faults in the persisted Store index, made as a disk or a bug would make
/// them, with the self-check on for every narrowed Grep: bytes flipped are
/// caught by the checksum at load (the index is dropped and learned anew);
/// an index that decodes but rules out a matching file gives one wrong
/// answer, which the self-check finds: the mismatch is logged and the
/// namespace's Greps scan from then on.
#[tokio::test]
async fn faults_in_the_persisted_index_are_caught_at_load_or_by_the_self_check() {
    let mut server = store_server("index_min_files = 0\nindex_self_check = 1.0");
    let mut fs = server.fs().await;
    let (expected, grep) = needle_files(&mut fs, "/memories/c", 300).await;
    learn_and_persist(&server, &mut fs, &grep, &expected).await;
    let store = server.workdir().join("store");

    // A disk flips a bit: the checksum refuses the copy at load.
    server.kill();
    {
        let (db, mut pieces) = index_pieces(&store);
        assert!(!pieces.is_empty(), "no persisted index");
        let last = pieces[0].1.len() - 1;
        pieces[0].1[last] ^= 0x20;
        put_pieces(&db, &pieces);
    }
    server.crash_and_restart();
    fs = server.fs().await;
    learn_and_persist(&server, &mut fs, &grep, &expected).await;
    let logs = server.logs.lock().unwrap().clone();
    assert!(logs.contains("checksum mismatch"), "{logs}");
    assert!(!logs.contains("search index loaded"));
    assert!(!logs.contains("self-check failed"));

    // A bug persists an index that decodes but rules out a matching file.
    server.kill();
    let victim = "/memories/c/007.txt";
    {
        let (db, pieces) = index_pieces(&store);
        let bytes: Vec<u8> = pieces.iter().flat_map(|(_, v)| v.clone()).collect();
        let bytes = without_the_victims_trigrams(&bytes);
        let ns = pieces[0].0[..4].to_vec();
        put_pieces(&db, &[([ns, vec![0; 4]].concat(), bytes)]);
    }
    server.crash_and_restart();
    fs = server.fs().await;
    let (matches, _) = grep_all(&mut fs, grep.clone()).await.unwrap();
    let wrong: Vec<String> = expected.iter().filter(|p| *p != victim).cloned().collect();
    assert_eq!(paths(matches), wrong, "the tampered index was not used");
    let failed = "search index self-check failed";
    assert!(
        server
            .wait_for_log(failed, std::time::Duration::from_secs(20))
            .await
    );
    let logs = server.logs.lock().unwrap().clone();
    let line = logs.lines().find(|l| l.contains(failed)).unwrap();
    assert!(
        line.contains("WARN") && line.contains("namespace=") && line.contains("mismatches=1"),
        "{line}"
    );
    for _ in 0..2 {
        let (matches, summary) = grep_all(&mut fs, grep.clone()).await.unwrap();
        assert_eq!(paths(matches), expected);
        assert_eq!(summary.files_searched, 300);
    }
    // The index is off: nothing more is narrowed, and the copy is gone.
    let logs = server.logs.lock().unwrap().clone();
    let after = &logs[logs.find(failed).unwrap()..];
    assert!(!after.contains("search index narrowed a grep"), "{after}");
    server.kill();
    assert!(index_pieces(&store).1.is_empty());
}

/// A kept index larger than what its reader may still hold is refused
/// unread at load: the Grep scans, learns within its share, and answers
/// right.
#[tokio::test]
async fn a_kept_index_over_the_readers_share_is_not_loaded() {
    let mut server = store_server("index_min_files = 0\nindex_self_check = 0");
    let mut fs = server.fs().await;
    let (expected, grep) = needle_files(&mut fs, "/memories/s", 300).await;
    learn_and_persist(&server, &mut fs, &grep, &expected).await;
    server.kill();
    let config = server.workdir().join("agentvfs.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let small = "[search]\nindex_bytes_per_principal = 4096\n";
    std::fs::write(&config, text.replacen("[search]\n", small, 1)).unwrap();
    server.crash_and_restart();
    fs = server.fs().await;
    let (matches, summary) = grep_all(&mut fs, grep.clone()).await.unwrap();
    assert_eq!(paths(matches), expected);
    assert_eq!(summary.files_searched, 300);
    // The line reaches the captured log after the answer, on the server's
    // own time.
    let line = "not loaded: over the principal's share";
    server
        .wait_for_log(line, std::time::Duration::from_secs(10))
        .await;
    let logs = server.logs.lock().unwrap().clone();
    let refused = logs
        .lines()
        .find(|l| l.contains(line))
        .unwrap_or_else(|| panic!("the kept index was not refused:\n{logs}"));
    assert!(refused.contains("room=4096"), "{refused}");
    assert!(!logs.contains("search index loaded"), "{logs}");
}
