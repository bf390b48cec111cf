//! Glob and Grep through the real engine (docs/contract.md § Glob and
//! Grep): results in path order, hidden and default-ignored names skipped
//! and counted, budgets and the summary's counters, context lines.

use crate::harness::{Tier, context, expect_err, matched};
use agentvfs::search::{AbortReason, Budgets, GrepRequest, Hit, SearchSpec};
use tonic::Code;

/// Budgets with only `max_results`.
fn max_results(n: u64) -> Budgets {
    Budgets {
        max_results: n,
        ..Budgets::default()
    }
}

/// Budgets with only `max_visited`.
fn max_visited(n: u64) -> Budgets {
    Budgets {
        max_visited: n,
        ..Budgets::default()
    }
}

/// A Grep request for `pattern`.
fn grep_for(pattern: &str) -> GrepRequest<'_> {
    GrepRequest {
        pattern,
        ..GrepRequest::default()
    }
}

/// Glob results come in path order, a directory's files before names that
/// merely extend the directory's name (`a/x.rs` before `a-b.rs`), and each
/// directory and file counts as visited.
pub fn glob_results_come_in_path_order(t: &Tier) {
    for rel in ["b/c/d.rs", "a.rs", "a-b.rs", "B.rs", "a/x.rs", "a/z.txt"] {
        t.write(rel, rel);
    }
    let found = t.glob("", "**/*.rs", Budgets::default());
    assert_eq!(
        found.paths(),
        ["B.rs", "a/x.rs", "a-b.rs", "a.rs", "b/c/d.rs"]
    );
    let s = found.summary();
    assert_eq!((s.matched, s.visited, s.aborted), (5, 9, None));
}

/// `*` never crosses `/`; only `**` does.
pub fn glob_star_stays_in_one_directory(t: &Tier) {
    for rel in ["top.rs", "src/lib.rs", "src/deep/mod.rs"] {
        t.write(rel, "x");
    }
    assert_eq!(t.glob("", "*.rs", Budgets::default()).paths(), ["top.rs"]);
    assert_eq!(
        t.glob("", "src/*.rs", Budgets::default()).paths(),
        ["src/lib.rs"]
    );
    assert_eq!(
        t.glob("", "**/mod.rs", Budgets::default()).paths(),
        ["src/deep/mod.rs"]
    );
}

/// A Glob result carries the file's Stat; a `paths_only` Glob carries the
/// path alone.
pub fn glob_results_carry_the_files_metadata(t: &Tier) {
    t.write("f.txt", "12345");
    let found = t.glob("", "*.txt", Budgets::default());
    let [Hit::Entry(entry)] = found.hits.as_slice() else {
        panic!("{:?}", found.hits);
    };
    assert_eq!(*entry, t.stat("f.txt").unwrap());
    let spec = SearchSpec::glob(t.base.clone(), "*.txt", true, Budgets::default()).unwrap();
    let found = t.search(spec);
    assert_eq!(
        found.hits,
        [Hit::Path {
            path: t.path("f.txt"),
            symlink: false
        }]
    );
}

/// Names starting with `.` are skipped and counted unless
/// `include_hidden`; a hidden directory is pruned whole.
pub fn hidden_names_are_skipped_and_counted(t: &Tier) {
    for rel in [
        ".env",
        ".hidden/a.txt",
        "src/.x",
        "src/y.txt",
        "visible.txt",
    ] {
        t.write(rel, "x");
    }
    let found = t.glob("", "**", Budgets::default());
    assert_eq!(found.paths(), ["src/y.txt", "visible.txt"]);
    let s = found.summary();
    assert_eq!((s.visited, s.skipped_hidden, s.skipped_ignored), (6, 3, 0));
    let all = Budgets {
        include_hidden: true,
        ..Budgets::default()
    };
    let found = t.glob("", "**", all);
    assert_eq!(
        found.paths(),
        [
            ".env",
            ".hidden/a.txt",
            "src/.x",
            "src/y.txt",
            "visible.txt"
        ]
    );
    let s = found.summary();
    assert_eq!((s.visited, s.skipped_hidden, s.skipped_ignored), (7, 0, 0));
}

/// The default-ignored names (docs/contract.md § Glob and Grep) are pruned
/// and counted, files and directories alike, `.git` as ignored rather than
/// hidden; `include_ignored` walks them, and `.git` is then hidden.
pub fn default_ignored_names_are_pruned_and_counted(t: &Tier) {
    for rel in [
        "node_modules/x.js",
        "target/debug/y",
        ".git/config",
        "src/a.rs",
        "build",
        "dist.txt",
    ] {
        t.write(rel, "x");
    }
    let found = t.glob("", "**", Budgets::default());
    assert_eq!(found.paths(), ["dist.txt", "src/a.rs"]);
    let s = found.summary();
    assert_eq!((s.visited, s.skipped_ignored, s.skipped_hidden), (7, 4, 0));
    let all = Budgets {
        include_ignored: true,
        ..Budgets::default()
    };
    let found = t.glob("", "**", all);
    assert_eq!(
        found.paths(),
        [
            "build",
            "dist.txt",
            "node_modules/x.js",
            "src/a.rs",
            "target/debug/y"
        ]
    );
    let s = found.summary();
    assert_eq!((s.visited, s.skipped_ignored, s.skipped_hidden), (10, 0, 1));
}

/// `max_results` stops the search at that many results, the first ones in
/// path order, with `limit`.
pub fn max_results_stops_the_search(t: &Tier) {
    for i in (0..10).rev() {
        t.write(&format!("f{i:02}"), "x");
    }
    let found = t.glob("", "*", max_results(3));
    assert_eq!(found.paths(), ["f00", "f01", "f02"]);
    let s = found.summary();
    assert_eq!((s.matched, s.visited), (3, 3));
    assert_eq!(s.aborted, Some(AbortReason::Limit));
}

/// `max_visited` stops the walk after that many entries, with
/// `count_limit`; what was found so far is the result.
pub fn max_visited_stops_the_walk(t: &Tier) {
    for i in 0..10 {
        t.write(&format!("f{i:02}"), "x");
    }
    let found = t.glob("", "*", max_visited(4));
    assert_eq!(found.paths(), ["f00", "f01", "f02", "f03"]);
    let s = found.summary();
    assert_eq!((s.matched, s.visited), (4, 4));
    assert_eq!(s.aborted, Some(AbortReason::CountLimit));
}

/// A budget spent before any result is a Timeout naming the reason and
/// the entries visited.
pub fn a_budget_spent_without_results_is_timeout(t: &Tier) {
    for i in 0..10 {
        t.write(&format!("f{i:02}"), "x");
    }
    let found = t.glob("", "*.none", max_visited(2));
    assert!(found.hits.is_empty());
    let err = found.end.expect_err("no result within the budget");
    assert_eq!(err.grpc_code(), Code::DeadlineExceeded, "{err}");
    let text = err.to_string();
    let prefix = "timeout: search stopped (count_limit) after visiting 2 entries in ";
    let suffix = " ms without a result; narrow the path or pattern, or raise max_visited / \
                  max_duration_ms";
    assert!(text.starts_with(prefix) && text.ends_with(suffix), "{text}");
}

/// Grep reports every matching line, files in path order, with the
/// summary's counters.
pub fn grep_reports_lines_in_path_order(t: &Tier) {
    t.write("b.txt", "nothing here\n");
    t.write("a.txt", "x needle\n");
    t.write("a-b.txt", "needle two\nneedle three\n");
    t.write("a/one.txt", "alpha\nneedle one\nbeta\n");
    let found = t.grep("", grep_for("needle"), Budgets::default());
    assert_eq!(
        found.files(),
        [
            ("a/one.txt".into(), vec![matched(2, "needle one", "needle")]),
            (
                "a-b.txt".into(),
                vec![
                    matched(1, "needle two", "needle"),
                    matched(2, "needle three", "needle")
                ]
            ),
            ("a.txt".into(), vec![matched(1, "x needle", "needle")]),
        ]
    );
    let s = found.summary();
    assert_eq!(
        (s.matched, s.matched_files, s.files_searched, s.visited),
        (4, 3, 4, 5)
    );
}

/// Context lines surround matches, numbered, marked as context, merged
/// where matches are close and cut at the file's edges.
pub fn grep_context_lines(t: &Tier) {
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    t.write("c.txt", text);
    let request = GrepRequest {
        before_context: 1,
        after_context: 1,
        ..grep_for("^line (1|5|6)$")
    };
    let found = t.grep("", request, Budgets::default());
    assert_eq!(
        found.files(),
        [(
            "c.txt".into(),
            vec![
                matched(1, "line 1", "line 1"),
                context(2, "line 2"),
                context(4, "line 4"),
                matched(5, "line 5", "line 5"),
                matched(6, "line 6", "line 6"),
                context(7, "line 7"),
            ]
        )]
    );
    assert_eq!(found.summary().matched, 3, "context lines are not results");
}

/// A file holding a NUL byte is binary: skipped by Grep and counted.
pub fn grep_skips_binary_files(t: &Tier) {
    t.write("bin.dat", b"\0needle\n".to_vec());
    t.write("text.txt", "needle\n");
    let found = t.grep("", grep_for("needle"), Budgets::default());
    assert_eq!(found.paths(), ["text.txt"]);
    let s = found.summary();
    assert_eq!((s.skipped_binary, s.files_searched), (1, 1));
}

/// `max_results` cuts Grep's lines, also within one file.
pub fn grep_max_results_cuts_lines(t: &Tier) {
    t.write("f", "needle 1\nneedle 2\nneedle 3\nneedle 4\n");
    t.write("g", "needle 5\n");
    let found = t.grep("", grep_for("needle"), max_results(2));
    assert_eq!(
        found.files(),
        [(
            "f".into(),
            vec![
                matched(1, "needle 1", "needle"),
                matched(2, "needle 2", "needle")
            ]
        )]
    );
    let s = found.summary();
    assert_eq!((s.matched, s.aborted), (2, Some(AbortReason::Limit)));
}

/// Grep rooted at a file searches that file alone.
pub fn grep_on_a_file_searches_it_alone(t: &Tier) {
    t.write("f.txt", "a\nneedle\n");
    t.write("g.txt", "needle\n");
    let found = t.grep("f.txt", grep_for("needle"), Budgets::default());
    assert_eq!(
        found.files(),
        [("f.txt".into(), vec![matched(2, "needle", "needle")])]
    );
    let s = found.summary();
    assert_eq!((s.visited, s.files_searched), (1, 1));
}

/// Glob rooted at a file fails with NotDirectory naming it.
pub fn glob_on_a_file_is_not_directory(t: &Tier) {
    t.write("f.txt", "x");
    let found = t.glob("f.txt", "*", Budgets::default());
    assert!(found.hits.is_empty());
    expect_err(
        found.end,
        Code::FailedPrecondition,
        &format!("not a directory: {}", t.path("f.txt")),
    );
}

/// A search from a missing root fails with NotFound naming it.
pub fn searching_a_missing_root_is_not_found(t: &Tier) {
    t.write("f.txt", "needle");
    for found in [
        t.glob("nope", "*", Budgets::default()),
        t.grep("nope", grep_for("needle"), Budgets::default()),
    ] {
        assert!(found.hits.is_empty());
        expect_err(
            found.end,
            Code::NotFound,
            &format!("not found: {}", t.path("nope")),
        );
    }
}

/// A search from the mount root finds the files below it with their full
/// logical paths (through the mounts below it, empty here, in a Composite).
pub fn searching_from_the_mount_root(t: &Tier) {
    t.write("a.txt", "needle");
    t.write("d/b.txt", "needle");
    let spec = SearchSpec::glob(t.mount.clone(), "**/*.txt", false, Budgets::default()).unwrap();
    assert_eq!(t.search(spec).paths(), ["a.txt", "d/b.txt"]);
    let spec = SearchSpec::grep(t.mount.clone(), grep_for("needle"), Budgets::default()).unwrap();
    let found = t.search(spec);
    assert_eq!(found.paths(), ["a.txt", "d/b.txt"]);
    assert_eq!(found.summary().matched_files, 2);
}

/// `.gitignore` rules leave files out, counted as ignored, where the tier
/// honours ignore files; elsewhere the ignore file is a hidden file like
/// any other. `include_ignored` finds the same files everywhere.
pub fn ignore_files_apply_where_the_tier_honours_them(t: &Tier) {
    t.write(".gitignore", "secret.txt\nlogs/\n");
    for rel in ["secret.txt", "logs/a.log", "keep.txt"] {
        t.write(rel, "x");
    }
    let found = t.glob("", "**", Budgets::default());
    let s = found.summary();
    if t.honours_ignore_files {
        assert_eq!(found.paths(), ["keep.txt"]);
        assert_eq!((s.visited, s.skipped_hidden, s.skipped_ignored), (4, 1, 2));
    } else {
        assert_eq!(found.paths(), ["keep.txt", "logs/a.log", "secret.txt"]);
        assert_eq!((s.visited, s.skipped_hidden, s.skipped_ignored), (5, 1, 0));
    }
    let all = Budgets {
        include_ignored: true,
        ..Budgets::default()
    };
    let found = t.glob("", "**", all);
    assert_eq!(found.paths(), ["keep.txt", "logs/a.log", "secret.txt"]);
    assert_eq!(found.summary().skipped_hidden, 1);
}
