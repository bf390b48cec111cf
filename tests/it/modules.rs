//! The module graph of `src/` follows its layers (docs/architecture.md §
//! Layers): dependencies point one way, configuration and start-up → front
//! ends → application layer → identity → tiers → search → values, and a
//! table of forbidden edges ([`FORBIDDEN`]) names what must never import
//! what, each with its reason.
//!
//! The check reads the source as text: every `crate::` and `super::` path in
//! code (use declarations, braced lists included, and paths written inline)
//! is an edge from the file's module to the longest module that path names.
//! Edges are compared between siblings: an edge from `a::x::y` to `a::z` is
//! `x → z` among the children of `a`. A child using its parent (or the
//! reverse) is how Rust modules are built and is not counted. Any cycle
//! among siblings fails the test, naming it; so does any edge between
//! top-level modules that the table forbids, naming the file and the path.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file below `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a source file: `src/backend/fs/mod.rs` → `backend::fs`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("below src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The code of a file without comments and string literals (so a doc
/// comment citing `crate::x` is no dependency).
fn code_of(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut code = String::new();
        let mut in_string = false;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '"' => in_string = !in_string,
                '\\' if in_string => {
                    chars.next();
                }
                '/' if !in_string && chars.peek() == Some(&'/') => break,
                _ if in_string => {}
                _ => code.push(c),
            }
        }
        out.push_str(&code);
        out.push('\n');
    }
    out
}

/// The module paths a file's code names, expanded from braced use lists:
/// `use crate::{a::X, b::{c, d}}` names `a::X`, `b::c` and `b::d`.
fn named_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    for (start, keyword) in code
        .match_indices("crate::")
        .chain(code.match_indices("super::"))
    {
        let preceded = start > 0 && {
            let b = bytes[start - 1];
            b.is_ascii_alphanumeric() || b == b'_' || b == b':'
        };
        if preceded {
            continue;
        }
        let base: Vec<String> = if keyword == "crate::" {
            Vec::new()
        } else {
            module[..module.len().saturating_sub(1)].to_vec()
        };
        expand(&code[start + keyword.len()..], base, &mut found);
    }
    found
}

/// Reads one path (with `{…}` groups) from `rest`, pushing each full
/// path; returns how many bytes it read.
fn expand(rest: &str, mut prefix: Vec<String>, found: &mut Vec<Vec<String>>) -> usize {
    let bytes = rest.as_bytes();
    let mut i = 0;
    loop {
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        if i > start {
            prefix.push(rest[start..i].to_owned());
        }
        if rest[i..].starts_with("::") {
            i += 2;
        } else if rest[i..].starts_with('{') {
            i += 1;
            loop {
                while i < bytes.len() && (bytes[i] == b',' || (bytes[i] as char).is_whitespace()) {
                    i += 1;
                }
                if i >= bytes.len() || bytes[i] == b'}' {
                    return i + 1;
                }
                i += expand(&rest[i..], prefix.clone(), found);
            }
        } else {
            found.push(prefix);
            return i;
        }
    }
}

/// The longest known module that `path` starts with.
fn resolve(path: &[String], modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|m| modules.contains(m))
}

/// Cycles of a directed graph, each as the list of its nodes (Tarjan's
/// strongly connected components with more than one node).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, node: &'g str) {
        let n = s.index.len();
        s.index.insert(node, n);
        s.low.insert(node, n);
        s.stack.push(node);
        s.on_stack.insert(node);
        for next in s.graph.get(node).into_iter().flatten() {
            let next = next.as_str();
            if !s.index.contains_key(next) {
                visit(s, next);
                let low = s.low[node].min(s.low[next]);
                s.low.insert(node, low);
            } else if s.on_stack.contains(next) {
                let low = s.low[node].min(s.index[next]);
                s.low.insert(node, low);
            }
        }
        if s.low[node] == s.index[node] {
            let mut component = Vec::new();
            while let Some(top) = s.stack.pop() {
                s.on_stack.remove(top);
                component.push(top.to_owned());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.found
}

/// Sibling edges `parent → (from → to)` of the whole crate.
fn sibling_graphs(src: &Path) -> BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let modules: BTreeSet<Vec<String>> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "main.rs"))
        .map(|f| module_of(src, f))
        .collect();
    let mut graphs: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in &files {
        if file.file_name().is_some_and(|n| n == "main.rs") {
            continue; // the binary, a front end of the library
        }
        let from = module_of(src, file);
        let code = code_of(&std::fs::read_to_string(file).expect("read source"));
        for named in named_paths(&code, &from) {
            let Some(to) = resolve(&named, &modules) else {
                continue;
            };
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == to.len() {
                continue; // parent and child
            }
            graphs
                .entry(from[..common].to_vec())
                .or_default()
                .entry(from[common].clone())
                .or_default()
                .insert(to[common].clone());
        }
    }
    graphs
}

/// The top: configuration and start-up, which build everything below.
const TOP: &[&str] = &["config", "startup"];
/// The front ends: adapters that decode a request, make one `service`
/// call and encode the answer.
const FRONT_ENDS: &[&str] = &["server", "mcp", "tools", "cli", "mount"];
/// Everything below the front ends: the application layer, identity, the
/// tiers, search and the shared values.
const BELOW: &[&str] = &[
    "service",
    "auth",
    "access",
    "audit",
    "backend",
    "search",
    "text",
    "entry",
    "scope",
    "change",
    "history",
    "metrics",
    "path",
    "private_file",
    "error",
    "pb",
];

/// Edges between top-level modules that must not exist: `(from, to, why)`.
const FORBIDDEN: &[(&[&str], &[&str], &str)] = &[
    (
        FRONT_ENDS,
        &["backend"],
        "front ends reach the tiers only through service (which re-exports what they hand over)",
    ),
    (
        &["tools"],
        &["pb"],
        "the tools answer in envelopes; server/tools.rs encodes them as protobuf",
    ),
    (
        &["tools", "mcp"],
        &["server", "cli"],
        "tools and mcp are adapters beside the gRPC server, which mounts them",
    ),
    (&["tools"], &["mcp"], "mcp is an adapter over tools"),
    (
        &["mount"],
        &["service", "server", "auth", "access", "search"],
        "the mount is a client of the server: it reaches it only over gRPC (docs/mount.md)",
    ),
    (
        BELOW,
        FRONT_ENDS,
        "nothing below the front ends imports a front end",
    ),
    (
        BELOW,
        TOP,
        "configuration sits at the top: each module owns its settings type",
    ),
    (
        FRONT_ENDS,
        TOP,
        "front ends take their own settings types, not the configuration",
    ),
];

/// Every edge between two top-level modules: `(from, to, file, path named)`.
fn top_level_edges(src: &Path) -> Vec<(String, String, String, String)> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let modules: BTreeSet<Vec<String>> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "main.rs"))
        .map(|f| module_of(src, f))
        .collect();
    let mut edges = Vec::new();
    for file in &files {
        let from = module_of(src, file);
        let Some(top) = from.first() else {
            continue; // lib.rs and main.rs: the crate root and the binary
        };
        let code = code_of(&std::fs::read_to_string(file).expect("read source"));
        for named in named_paths(&code, &from) {
            if let Some(to) = resolve(&named, &modules)
                && to[0] != *top
            {
                let shown = file.strip_prefix(src).unwrap_or(file).display().to_string();
                edges.push((top.clone(), to[0].clone(), shown, named.join("::")));
            }
        }
    }
    edges
}

/// The edges of `edges` that [`FORBIDDEN`] forbids, each as a line naming
/// the file, the path and the reason.
fn forbidden(edges: &[(String, String, String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (from, to, file, named) in edges {
        for (froms, tos, why) in FORBIDDEN {
            if froms.contains(&from.as_str()) && tos.contains(&to.as_str()) {
                found.push(format!("src/{file} names {named} ({from} → {to}): {why}"));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

#[test]
fn no_module_imports_across_a_forbidden_edge() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = top_level_edges(&src);
    assert!(
        edges
            .iter()
            .any(|(from, to, ..)| from == "server" && to == "service"),
        "the checker must see server → service"
    );
    // Every top-level module sits in one layer, so a new one must be placed.
    let mut tops: Vec<String> = std::fs::read_dir(&src)
        .expect("read src")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_dir() || p.extension().is_some_and(|e| e == "rs"))
        .filter_map(|p| Some(p.file_stem()?.to_string_lossy().into_owned()))
        .filter(|name| !matches!(name.as_str(), "lib" | "main"))
        .collect();
    tops.sort();
    tops.dedup();
    for top in &tops {
        let layers = [TOP, FRONT_ENDS, BELOW]
            .iter()
            .filter(|layer| layer.contains(&top.as_str()))
            .count();
        assert_eq!(
            layers, 1,
            "src/{top} must sit in exactly one layer of this test"
        );
    }
    let found = forbidden(&edges);
    assert!(found.is_empty(), "forbidden imports:\n{}", found.join("\n"));
}

#[test]
fn the_table_catches_a_front_end_naming_a_tier() {
    let code = code_of("use crate::backend::{ChunkReader, Precondition};");
    let edges: Vec<_> = named_paths(&code, &["server".to_owned(), "filesystem".to_owned()])
        .into_iter()
        .map(|named| {
            let to = named[0].clone();
            (
                "server".to_owned(),
                to,
                "server/filesystem.rs".to_owned(),
                named.join("::"),
            )
        })
        .collect();
    assert_eq!(
        forbidden(&edges),
        [
            "src/server/filesystem.rs names backend::ChunkReader (server → backend): front ends \
             reach the tiers only through service (which re-exports what they hand over)",
            "src/server/filesystem.rs names backend::Precondition (server → backend): front ends \
             reach the tiers only through service (which re-exports what they hand over)",
        ]
    );
}

#[test]
fn the_module_graph_has_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graphs = sibling_graphs(&src);
    let top = graphs
        .get(&Vec::new())
        .expect("the crate's top-level modules");
    assert!(
        top.get("server")
            .is_some_and(|deps| deps.contains("service")),
        "the checker must see server → service: {top:?}"
    );
    let found: Vec<String> = graphs
        .iter()
        .flat_map(|(parent, graph)| {
            cycles(graph).into_iter().map(move |cycle| {
                let at = if parent.is_empty() {
                    "crate".to_owned()
                } else {
                    parent.join("::")
                };
                format!("in {at}: {}", cycle.join(" ↔ "))
            })
        })
        .collect();
    assert!(found.is_empty(), "module cycles:\n{}", found.join("\n"));
}

#[test]
fn the_checker_finds_a_cycle_and_expands_braced_lists() {
    let module = vec!["a".to_owned(), "b".to_owned()];
    let code =
        code_of("use crate::{x::Y, z::{p, q::R}}; // crate::ignored\nlet s = \"crate::no\";");
    let named = named_paths(&code, &module);
    let names: Vec<String> = named.iter().map(|p| p.join("::")).collect();
    assert_eq!(names, ["x::Y", "z::p", "z::q::R"]);
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["a".to_owned()])),
        ("c".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]
    .into();
    assert_eq!(cycles(&graph), vec![vec!["a".to_owned(), "b".to_owned()]]);
}

/// The files that may answer with `Service::run_asked` (or wrap an answer
/// in `Asked`): front ends composing single-path steps whose answers carry
/// nothing beyond the paths their calls named (docs/security.md § Answers
/// show only what the caller may see). A new use is added here on purpose,
/// after reading it.
const ASKED: &[&str] = &[
    "service/mod.rs",
    "service/read.rs",
    "tools/apply_patch.rs",
    "tools/claude.rs",
    "tools/delete.rs",
    "tools/edit.rs",
    "tools/memory.rs",
    "tools/read.rs",
    "tools/text_editor.rs",
    "tools/write.rs",
];

#[test]
fn only_the_listed_files_answer_without_a_disclosure_check() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut users: Vec<String> = files
        .iter()
        .filter(|file| {
            let code = code_of(&std::fs::read_to_string(file).expect("read source"));
            code.contains("run_asked(") || code.contains("Asked(")
        })
        .map(|file| {
            let rel = file.strip_prefix(&src).expect("below src");
            rel.to_string_lossy().replace('\\', "/")
        })
        .collect();
    users.sort();
    assert_eq!(
        users, ASKED,
        "answers that skip the disclosure check (run_asked, Asked) changed: read each new use, \
         then list it in ASKED"
    );
}

/// `scripts/test` runs each test target as a suite of its own, to time it:
/// every target under `tests/` (a file, or a folder with `main.rs`) must
/// be in its list, or the run would skip it.
#[test]
fn every_test_target_is_a_suite_of_scripts_test() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = std::fs::read_to_string(root.join("scripts/test")).expect("read scripts/test");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(root.join("tests")).expect("read tests") {
        let path = entry.expect("dir entry").path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let target = if path.is_dir() {
            path.join("main.rs").is_file()
        } else {
            path.extension().is_some_and(|e| e == "rs")
        };
        if target && !script.contains(&format!("\"--test {name}\"")) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "test targets scripts/test does not run: {missing:?}"
    );
}

/// The modules of one folder of TypeScript sources each import, by the
/// relative specifiers of their `import`/`export … from "./x.js"`
/// statements (the folder's own modules only: `./gen/…` and packages are
/// leaves). Keyed by file stem.
fn typescript_imports(files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph = BTreeMap::new();
    for (stem, text) in files {
        let mut imports = BTreeSet::new();
        for line in text.lines() {
            let line = line.trim();
            if !(line.starts_with("import") || line.starts_with("export") || line.starts_with('}'))
            {
                continue;
            }
            let Some((_, spec)) = line.rsplit_once("from \"./") else {
                continue;
            };
            let target = spec.trim_end_matches(['"', ';']).trim_end_matches(".js");
            if !target.contains('/') {
                imports.insert(target.to_owned());
            }
        }
        graph.insert(stem.clone(), imports);
    }
    graph
}

/// No circle among the TypeScript client's modules (one appeared once:
/// `branch.ts` and `client.ts` imported each other).
#[test]
fn the_typescript_client_has_no_cycle() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/ts/src");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("read clients/ts/src") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|e| e == "ts") {
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            files.push((stem, std::fs::read_to_string(&path).expect("read")));
        }
    }
    let graph = typescript_imports(&files);
    assert!(
        graph.get("client").is_some_and(|i| i.contains("branch")),
        "the import reader found no edge: {graph:?}"
    );
    let found = cycles(&graph);
    assert!(found.is_empty(), "circles in clients/ts/src: {found:?}");
    // The reader sees a circle written across lines, as the client's
    // multi-line imports are.
    let circle = [
        (
            "a".to_owned(),
            "import {\n  b,\n} from \"./b.js\";".to_owned(),
        ),
        (
            "b".to_owned(),
            "import type { A } from \"./a.js\";".to_owned(),
        ),
    ];
    assert!(!cycles(&typescript_imports(&circle)).is_empty());
}

/// Most lines one source file under `src/` may have: past it, a file holds
/// more than one reader can keep in mind, and is split along what it does.
const MAX_SOURCE_LINES: usize = 900;

/// No file under `src/` passes [`MAX_SOURCE_LINES`].
#[test]
fn no_source_file_passes_900_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut long: Vec<String> = files
        .iter()
        .filter_map(|file| {
            let lines = std::fs::read_to_string(file).expect("read").lines().count();
            (lines > MAX_SOURCE_LINES).then(|| format!("{} ({lines})", file.display()))
        })
        .collect();
    long.sort();
    assert!(
        long.is_empty(),
        "files over {MAX_SOURCE_LINES} lines; split each along what it does: {long:?}"
    );
}
