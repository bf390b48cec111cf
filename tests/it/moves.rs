//! Move (`Backend::rename`) on the State and Store tiers, in-process on a
//! real in-memory State and a real RocksDB Store: files, directory trees,
//! every refusal of docs/contract.md § Move, versions, memory accounting,
//! persistence, and atomicity under concurrent moves, writes and listings.
//! Unlike the other modules these run in-process: the mount table does not
//! route Move to the tiers yet, so the server cannot reach them.

use agentvfs::VfsPath;
use agentvfs::backend::state::{StateBackend, StateLimits};
use agentvfs::backend::store::{StoreBackend, StoreOptions};
use agentvfs::backend::{Backend, Keep, MoveOutcome, Precondition};
use agentvfs::entry::Entry;
use agentvfs::error::Error;
use agentvfs::scope::Scope;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// One tier under test, mounted where the default configuration mounts it.
struct Tier {
    name: &'static str,
    mount: &'static str,
    backend: Arc<dyn Backend>,
    /// The State tier itself, for its memory count.
    state: Option<Arc<StateBackend>>,
    /// Keeps the Store's data directory alive.
    _dir: Option<tempfile::TempDir>,
}

impl Tier {
    /// The logical path `rel` below the mount.
    fn p(&self, rel: &str) -> VfsPath {
        VfsPath::parse(&format!("{}/{rel}", self.mount.trim_end_matches('/'))).unwrap()
    }

    fn write(&self, rel: &str, data: &[u8]) -> u64 {
        self.backend
            .write(
                &scope(),
                &self.p(rel),
                data.to_vec(),
                Precondition::default(),
            )
            .unwrap_or_else(|e| panic!("{}: write {rel}: {e}", self.name))
            .version
    }

    fn read(&self, rel: &str) -> (Vec<u8>, Entry) {
        self.backend
            .read(&scope(), &self.p(rel))
            .unwrap_or_else(|e| panic!("{}: read {rel}: {e}", self.name))
    }

    fn rename(&self, from: &str, to: &str, pre: Precondition) -> Result<MoveOutcome, Error> {
        self.backend
            .rename(&scope(), &self.p(from), &self.p(to), pre)
    }

    fn missing(&self, rel: &str) -> bool {
        matches!(
            self.backend.stat(&scope(), &self.p(rel)),
            Err(Error::NotFound(_))
        )
    }

    /// Names listed in the directory `rel`.
    fn names(&self, rel: &str) -> Vec<String> {
        self.backend
            .list(&scope(), &self.p(rel))
            .unwrap_or_else(|e| panic!("{}: list {rel}: {e}", self.name))
            .into_iter()
            .map(|e| e.path.name().to_owned())
            .collect()
    }
}

fn scope() -> Scope {
    Scope::default()
}

fn limits(max_total_bytes: u64) -> StateLimits {
    StateLimits {
        max_total_bytes,
        max_file_bytes: 64 << 20,
        idle_ttl: Duration::from_secs(3600),
        max_sessions: 16,
    }
}

/// A State tier keeping no history and no change log: these tests count
/// the memory of files alone (tests/it/history.rs counts the rest).
fn state() -> Tier {
    let state = Arc::new(StateBackend::new(
        VfsPath::root(),
        limits(1 << 30),
        Keep::NOTHING,
    ));
    Tier {
        name: "state",
        mount: "/",
        backend: state.clone(),
        state: Some(state),
        _dir: None,
    }
}

/// A Store keeping no history and no change log, as `state`.
fn open_store(dir: &std::path::Path) -> StoreBackend {
    let options = StoreOptions {
        sync: false,
        max_file_bytes: 64 << 20,
        keep: Keep::NOTHING,
    };
    StoreBackend::open(VfsPath::parse("/memories").unwrap(), dir, options).unwrap()
}

fn store() -> Tier {
    let dir = tempfile::tempdir().unwrap();
    Tier {
        name: "store",
        mount: "/memories",
        backend: Arc::new(open_store(dir.path())),
        state: None,
        _dir: Some(dir),
    }
}

/// Both tiers, fresh.
fn tiers() -> [Tier; 2] {
    [state(), store()]
}

/// A file moves with its content and times, and a new, larger version;
/// missing parents of the destination appear and the emptied source
/// directory vanishes.
#[test]
fn a_file_moves_with_its_content_times_and_a_new_version() {
    for t in tiers() {
        let old = t.write("src/a.txt", b"hello");
        let (_, before) = t.read("src/a.txt");
        std::thread::sleep(Duration::from_millis(5));
        let moved = t
            .rename("src/a.txt", "dst/deep/b.txt", Precondition::default())
            .unwrap();
        assert_eq!(moved.files_moved, 1, "{}", t.name);
        assert!(moved.version > old, "{}: versions only grow", t.name);
        let (data, after) = t.read("dst/deep/b.txt");
        assert_eq!(data, b"hello", "{}", t.name);
        assert_eq!(after.version, moved.version, "{}", t.name);
        assert_eq!(
            (after.created, after.modified),
            (before.created, before.modified),
            "{}: times kept",
            t.name
        );
        assert!(t.missing("src/a.txt") && t.missing("src"), "{}", t.name);
        assert_eq!(t.names("dst/deep"), ["b.txt"], "{}", t.name);
        // A version taken before the move never matches the moved file.
        let stale = Precondition::if_version(Some(old));
        assert!(
            matches!(
                t.rename("dst/deep/b.txt", "back.txt", stale),
                Err(Error::VersionMismatch { .. })
            ),
            "{}",
            t.name
        );
    }
}

/// A directory tree moves whole: every file below it, content and all, each
/// with a new version above every earlier one; a sibling sharing its name's
/// prefix stays.
#[test]
fn a_directory_tree_moves_whole() {
    for t in tiers() {
        let mut max = 0;
        for (rel, data) in [
            ("d/x", "x"),
            ("d/sub/y", "y"),
            ("d/sub/deeper/z", "z"),
            ("d-sibling", "s"),
            ("d.txt", "t"),
        ] {
            max = max.max(t.write(rel, data.as_bytes()));
        }
        let moved = t.rename("d", "e/f", Precondition::default()).unwrap();
        assert_eq!(
            moved,
            MoveOutcome {
                files_moved: 3,
                version: 0
            },
            "{}",
            t.name
        );
        assert!(t.missing("d"), "{}", t.name);
        assert_eq!(t.names("e/f"), ["sub", "x"], "{}", t.name);
        for (rel, data) in [
            ("e/f/x", "x"),
            ("e/f/sub/y", "y"),
            ("e/f/sub/deeper/z", "z"),
        ] {
            let (got, entry) = t.read(rel);
            assert_eq!(got, data.as_bytes(), "{}: {rel}", t.name);
            assert!(entry.version > max, "{}: {rel} has a new version", t.name);
        }
        assert_eq!(t.read("d-sibling").0, b"s", "{}", t.name);
        assert_eq!(t.read("d.txt").0, b"t", "{}", t.name);
        let later = t.write("later", b"");
        let newest = t.read("e/f/sub/deeper/z").1.version;
        assert!(later > newest, "{}: versions keep growing", t.name);
    }
}

/// `create_only` refuses any existing destination; without it a file
/// replaces a file (and only a file).
#[test]
fn create_only_and_replacing_a_file() {
    for t in tiers() {
        t.write("a", b"new");
        t.write("b", b"old");
        let create_only = Precondition {
            create_only: true,
            ..Precondition::default()
        };
        let err = t.rename("a", "b", create_only).unwrap_err();
        assert_eq!(
            err,
            Error::AlreadyExists(t.p("b").to_string()),
            "{}",
            t.name
        );
        assert_eq!(t.read("a").0, b"new", "{}: nothing moved", t.name);
        t.rename("a", "c", create_only).unwrap();
        t.rename("c", "b", Precondition::default()).unwrap();
        assert_eq!(t.read("b").0, b"new", "{}: the file replaced", t.name);
        assert!(t.missing("c"), "{}", t.name);
    }
}

/// `if_version` applies to the source: it must be the file's version, and a
/// directory takes none.
#[test]
fn if_version_guards_the_source_file_only() {
    for t in tiers() {
        let v = t.write("f", b"1");
        t.write("dir/g", b"2");
        let wrong = Precondition::if_version(Some(v + 100));
        assert!(
            matches!(t.rename("f", "h", wrong), Err(Error::VersionMismatch { expected, actual, .. }) if expected == v + 100 && actual == v),
            "{}",
            t.name
        );
        let right = Precondition::if_version(Some(v));
        assert_eq!(t.rename("f", "h", right).unwrap().files_moved, 1);
        assert_eq!(
            t.rename("dir", "dir2", right).unwrap_err(),
            Error::InvalidArgument("if_version applies to files, not directories".into()),
            "{}",
            t.name
        );
        assert_eq!(t.names("dir"), ["g"], "{}", t.name);
    }
}

/// Every refusal names the path it is about, and changes nothing.
#[test]
fn refusals_follow_the_contract() {
    for t in tiers() {
        t.write("file", b"f");
        t.write("dir/inner", b"i");
        t.write("other/x", b"x");
        let pre = Precondition::default();
        // Destination below a file.
        assert_eq!(
            t.rename("dir", "file/sub", pre).unwrap_err(),
            Error::NotDirectory(t.p("file").to_string()),
            "{}",
            t.name
        );
        // A directory replaces nothing: neither a file nor a directory.
        assert_eq!(
            t.rename("dir", "file", pre).unwrap_err(),
            Error::AlreadyExists(t.p("file").to_string()),
            "{}",
            t.name
        );
        assert_eq!(
            t.rename("dir", "other", pre).unwrap_err(),
            Error::AlreadyExists(t.p("other").to_string()),
            "{}",
            t.name
        );
        // A file onto a directory.
        assert_eq!(
            t.rename("file", "other", pre).unwrap_err(),
            Error::IsDirectory(t.p("other").to_string()),
            "{}",
            t.name
        );
        // Source missing, in a written scope and in one never written.
        assert_eq!(
            t.rename("nothing", "elsewhere", pre).unwrap_err(),
            Error::NotFound(t.p("nothing").to_string()),
            "{}",
            t.name
        );
        let stranger = Scope {
            session: "never-written".into(),
            namespace: "never-written".into(),
            ..Scope::default()
        };
        assert_eq!(
            t.backend
                .rename(&stranger, &t.p("file"), &t.p("moved"), pre)
                .unwrap_err(),
            Error::NotFound(t.p("file").to_string()),
            "{}",
            t.name
        );
        // The tier's own mount root moves nowhere, and nothing moves onto it.
        let root = VfsPath::parse(t.mount).unwrap();
        let refused = |e: Error| {
            e == Error::InvalidArgument(format!("{root} is a mount root; a mount cannot be moved"))
        };
        assert!(
            refused(
                t.backend
                    .rename(&scope(), &root, &t.p("x"), pre)
                    .unwrap_err()
            ),
            "{}",
            t.name
        );
        assert!(
            refused(
                t.backend
                    .rename(&scope(), &t.p("file"), &root, pre)
                    .unwrap_err()
            ),
            "{}",
            t.name
        );
        assert_eq!(t.read("file").0, b"f", "{}", t.name);
        assert_eq!(t.names("dir"), ["inner"], "{}", t.name);
        assert_eq!(t.names("other"), ["x"], "{}", t.name);
    }
}

/// The State tier counts a moved file at its new path: a longer path costs
/// more, moving back restores the count exactly, and a move that would
/// overfill the tier is refused whole.
#[test]
fn state_memory_accounting_follows_moved_paths() {
    let state = StateBackend::new(VfsPath::root(), limits(4096), Keep::NOTHING);
    let s = scope();
    let p = |s: &str| VfsPath::parse(s).unwrap();
    for i in 0..3 {
        let path = p(&format!("/d/f{i}"));
        state
            .write(&s, &path, vec![b'x'; 100], Precondition::default())
            .unwrap();
    }
    let before = state.total_bytes();
    let longer = "/a-much-longer-directory-name";
    state
        .rename(&s, &p("/d"), &p(longer), Precondition::default())
        .unwrap();
    let grown = (longer.len() - "/d".len()) as u64;
    assert_eq!(state.total_bytes(), before + 3 * 3 * grown);
    state
        .rename(&s, &p(longer), &p("/d"), Precondition::default())
        .unwrap();
    assert_eq!(state.total_bytes(), before);
    // Fill the tier, then try to lengthen every path.
    let fill = 4096 - state.total_bytes() - 3 * 4 - 256;
    state
        .write(
            &s,
            &p("/pad"),
            vec![0; fill as usize],
            Precondition::default(),
        )
        .unwrap();
    let full = state.total_bytes();
    let err = state
        .rename(&s, &p("/d"), &p(longer), Precondition::default())
        .unwrap_err();
    assert!(matches!(err, Error::TooLarge(_)), "{err}");
    assert_eq!(state.total_bytes(), full);
    assert_eq!(state.list(&s, &p("/d")).unwrap().len(), 3);
    // Replacing a file by a move frees the replaced file.
    state
        .rename(&s, &p("/d/f0"), &p("/d/f1"), Precondition::default())
        .unwrap();
    assert_eq!(state.total_bytes(), full - (100 + 3 * 5 + 256));
}

/// Store: a moved large (chunked) file streams from its new path, a file it
/// replaced is gone, and after a restart the move and the versions hold.
#[test]
fn store_moves_survive_a_restart_with_chunked_content() {
    let dir = tempfile::tempdir().unwrap();
    let s = scope();
    let p = |s: &str| VfsPath::parse(s).unwrap();
    let big: Vec<u8> = (0..3 * (1 << 20) + 17).map(|i| (i % 251) as u8).collect();
    let moved = {
        let store = open_store(dir.path());
        store
            .write(
                &s,
                &p("/memories/big"),
                big.clone(),
                Precondition::default(),
            )
            .unwrap();
        store
            .write(
                &s,
                &p("/memories/old/big"),
                vec![7; 2 << 20],
                Precondition::default(),
            )
            .unwrap();
        let moved = store
            .rename(
                &s,
                &p("/memories/big"),
                &p("/memories/old/big"),
                Precondition::default(),
            )
            .unwrap();
        let (_, chunks) = store
            .read_chunks(&s, &p("/memories/old/big"), 1 << 20)
            .unwrap();
        let streamed: Vec<u8> = chunks.flat_map(Result::unwrap).collect();
        assert!(streamed == big, "streamed content differs");
        moved
    };
    let store = open_store(dir.path());
    let (data, entry) = store.read(&s, &p("/memories/old/big")).unwrap();
    assert!(data == big, "content differs after restart");
    assert_eq!(entry.version, moved.version);
    assert!(matches!(
        store.stat(&s, &p("/memories/big")),
        Err(Error::NotFound(_))
    ));
    let next = store
        .write(&s, &p("/memories/next"), vec![], Precondition::default())
        .unwrap();
    assert!(next.version > moved.version, "the generation persisted");
}

/// Many threads move files back and forth between two names in one
/// directory and whole directories between two names, while readers list
/// that directory: every listing (one consistent read) shows each file
/// exactly once, and after 200 moves nothing is lost or duplicated (and the
/// State tier's memory count is what it was).
#[test]
fn concurrent_moves_lose_and_duplicate_nothing() {
    const FILES: usize = 4;
    const MOVES: usize = 200;
    for t in tiers() {
        let t = Arc::new(t);
        for i in 0..FILES {
            t.write(&format!("pp/f{i}"), format!("file {i}").as_bytes());
        }
        t.write("pp/da/inside", b"dir");
        t.write("pp/da/deeper/more", b"dir");
        let bytes = |t: &Tier| t.state.as_ref().map(|s| s.total_bytes());
        // Every name has a twin of the same length: moves cost nothing.
        let bytes_before = bytes(&t);
        let done = Arc::new(AtomicBool::new(false));
        let moves = Arc::new(AtomicUsize::new(0));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (t, done) = (t.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut lists = 0;
                    while !done.load(Ordering::SeqCst) || lists == 0 {
                        let names = t.names("pp");
                        for i in 0..FILES {
                            let seen = names
                                .iter()
                                .filter(|n| **n == format!("f{i}") || **n == format!("g{i}"))
                                .count();
                            assert_eq!(seen, 1, "{}: file {i} in {names:?}", t.name);
                        }
                        let dirs = names.iter().filter(|n| *n == "da" || *n == "db").count();
                        assert_eq!(dirs, 1, "{}: one directory in {names:?}", t.name);
                        lists += 1;
                    }
                    lists
                })
            })
            .collect();
        let movers: Vec<_> = (0..4)
            .map(|w| {
                let (t, moves) = (t.clone(), moves.clone());
                std::thread::spawn(move || {
                    let mut n = w;
                    while moves.load(Ordering::SeqCst) < MOVES {
                        n += 1;
                        let (a, b) = match n % (FILES + 1) {
                            FILES => ("pp/da".to_owned(), "pp/db".to_owned()),
                            i => (format!("pp/f{i}"), format!("pp/g{i}")),
                        };
                        let pre = Precondition::default();
                        let done = match t.rename(&a, &b, pre) {
                            Err(Error::NotFound(_)) => t.rename(&b, &a, pre),
                            other => other,
                        };
                        match done {
                            Ok(_) => {
                                moves.fetch_add(1, Ordering::SeqCst);
                            }
                            // Another mover got there in between.
                            Err(Error::NotFound(_)) => {}
                            Err(err) => panic!("{}: move {a} / {b}: {err}", t.name),
                        }
                    }
                })
            })
            .collect();
        for m in movers {
            m.join().unwrap();
        }
        done.store(true, Ordering::SeqCst);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
        assert!(moves.load(Ordering::SeqCst) >= MOVES);
        let mut found = BTreeMap::new();
        for i in 0..FILES {
            for name in [format!("pp/f{i}"), format!("pp/g{i}")] {
                if !t.missing(&name) {
                    found.insert(i, t.read(&name).0);
                }
            }
        }
        assert_eq!(found.len(), FILES, "{}: {found:?}", t.name);
        for (i, data) in found {
            assert_eq!(data, format!("file {i}").as_bytes(), "{}", t.name);
        }
        let dir = if t.missing("pp/da") { "pp/db" } else { "pp/da" };
        assert_eq!(t.read(&format!("{dir}/inside")).0, b"dir", "{}", t.name);
        assert_eq!(
            t.read(&format!("{dir}/deeper/more")).0,
            b"dir",
            "{}",
            t.name
        );
        assert_eq!(bytes(&t), bytes_before, "{}", t.name);
    }
}

/// Writes into a directory racing with moves of that directory each land
/// exactly once, in the old tree (moved along) or a new one, never lost.
#[test]
fn writes_racing_a_directory_move_land_exactly_once() {
    for t in tiers() {
        let t = Arc::new(t);
        t.write("w/a/seed", b"seed");
        let writer = {
            let t = t.clone();
            std::thread::spawn(move || {
                for i in 0..300 {
                    t.write(&format!("w/a/n{i}"), b"n");
                }
            })
        };
        let mover = {
            let t = t.clone();
            std::thread::spawn(move || {
                for i in 0..100 {
                    let pre = Precondition::default();
                    match t.rename("w/a", &format!("w/moved{i}"), pre) {
                        Ok(_) | Err(Error::NotFound(_)) => {}
                        Err(err) => panic!("{}: {err}", t.name),
                    }
                }
            })
        };
        writer.join().unwrap();
        mover.join().unwrap();
        let mut names = Vec::new();
        for dir in t.names("w") {
            for name in t.names(&format!("w/{dir}")) {
                names.push(name);
            }
        }
        names.sort();
        let mut expected: Vec<String> = (0..300).map(|i| format!("n{i}")).collect();
        expected.push("seed".into());
        expected.sort();
        assert_eq!(names, expected, "{}", t.name);
    }
}
