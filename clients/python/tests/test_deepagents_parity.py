"""Differential test: deepagents' own `FilesystemBackend(virtual_mode=True)`
over a temporary directory against `AgentVfsBackend` over a real server whose
Filesystem mount at `/` is an identical copy. Every case runs on both and the
results are compared field by field, so a new divergence shows up by itself.

The only differences allowed are the documented ones (clients/python/README.md,
"Differences from FilesystemBackend"); each is applied by a named function
below (`documented_*`), never by loosening a comparison. deepagents' grep uses
ripgrep when it is on PATH and a Python search otherwise; the reference here
is pinned to the Python search, which every machine has, so the test does not
depend on what is installed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import deepagents.backends.filesystem as reference_module
import pytest
from deepagents.backends.filesystem import FilesystemBackend

from agentvfs import Client
from agentvfs.deepagents import AgentVfsBackend

from .conftest import Server

#: The tree both backends serve (bytes, so CRLF and invalid UTF-8 stay exact).
FILES: dict[str, bytes] = {
    "README.md": b"# Title\nhello world\n",
    "src/main.py": b"def main():\n    print('hello')\n",
    "src/util/helpers.py": b"x = 1\n# hello again\n",
    "src/.env": b"SECRET=hello\n",
    "src-extra/notes.md": b"hello from a sibling\n",
    ".github/workflows/ci.yml": b"name: ci\n",
    ".hidden/notes.txt": b"hello hidden\n",
    "docs/guide.md": b"guide\nhello\nhello\n",
    "crlf.txt": b"one\r\ntwo\r\nthree\r\n",
    "cr.txt": b"alpha\rbeta\r",
    "empty.txt": b"",
    "blank.txt": b"  \n\n",
    "no_newline.txt": b"last line",
    "dup.txt": b"foo\nfoo\nbar\n",
    "big.txt": b"".join(b"line %d\n" % i for i in range(3000)),
    "unicode/\u00fcn\u00ef c\u00f8d\u00e9.txt": "h\u00e9llo w\u00f6rld\n".encode(),
    "\u65e5\u672c/\u30d5\u30a1\u30a4\u30eb.txt": "\u3053\u3093\u306b\u3061\u306f hello\n".encode(),
    "image.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    "latin1.txt": b"caf\xe9\n",
    "nul.dat": b"a\x00b\n",
}


def build(root: Path) -> None:
    for rel, data in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (root / "emptydir").mkdir()


@pytest.fixture(scope="module")
def dirs() -> Iterator[tuple[Path, Path]]:
    """Two identical trees: the reference's and the server's."""
    with tempfile.TemporaryDirectory() as tmp:
        ref, ours = Path(tmp) / "reference", Path(tmp) / "served"
        build(ref)
        shutil.copytree(ref, ours, symlinks=True, copy_function=shutil.copy2)
        # Same modification times on both sides, directories included.
        for dirpath, dirnames, filenames in os.walk(ref):
            for name in dirnames + filenames:
                src = Path(dirpath) / name
                st = src.stat()
                os.utime(ours / src.relative_to(ref), ns=(st.st_atime_ns, st.st_mtime_ns))
        yield ref, ours


@pytest.fixture(scope="module")
def pair(dirs: tuple[Path, Path], start_server: Callable[[str | None], Server]) -> Iterator[tuple[Any, Any]]:
    ref_dir, our_dir = dirs
    server = start_server(f'[[mount]]\nprefix = "/"\ntier = "filesystem"\nroot = "{our_dir}"\n')
    with Client(server.address) as client:
        yield FilesystemBackend(root_dir=ref_dir, virtual_mode=True), AgentVfsBackend(client)


@pytest.fixture(autouse=True)
def python_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pins the reference's grep to its Python search (see the module doc)."""
    monkeypatch.setattr(reference_module, "_resolve_ripgrep_path", lambda: None)


def both(pair: tuple[Any, Any], method: str, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    ref, ours = pair
    return getattr(ref, method)(*args, **kwargs), getattr(ours, method)(*args, **kwargs)


def as_dict(result: Any) -> Any:
    """A result object as plain data, to compare and to print."""
    if isinstance(result, list):
        return [as_dict(r) for r in result]
    if hasattr(result, "__dataclass_fields__"):
        return {k: as_dict(getattr(result, k)) for k in result.__dataclass_fields__}
    return result


def documented_grep_order(result: dict[str, Any]) -> dict[str, Any]:
    """agentvfs returns matches in path order; deepagents' search in directory
    order, which varies by file system: compare as sorted."""
    if result.get("matches"):
        result["matches"] = sorted(result["matches"], key=lambda m: (m["path"], m["line"]))
    return result


def documented_grep_of_a_file(result: dict[str, Any], path: str | None, root: Path) -> dict[str, Any]:
    """Given a file as `path`, agentvfs searches that file, as deepagents'
    ripgrep search does; its Python search walks the whole tree instead.
    Keep only the reference's matches in the file."""
    if path is not None and (root / path.lstrip("/")).is_file() and result.get("matches"):
        result["matches"] = [m for m in result["matches"] if m["path"] == path]
    return result


def documented_os_error(ref: dict[str, Any], ours: dict[str, Any], real_root: Path) -> None:
    """deepagents' OS errors name the real path on disk (`[Errno 21] Is a
    directory: '/tmp/.../src'`); agentvfs never shows where a mount lies on
    disk. Both must start alike (`Error writing file '/src'`); the cause after
    it is each one's own."""
    error = ref.get("error")
    if isinstance(error, str) and (str(real_root) in error or "[Errno" in error):
        for result in (ref, ours):
            if isinstance(result.get("error"), str):
                result["error"] = result["error"].split("': ", 1)[0] + "': <os error>"


READ_CASES: list[tuple[Any, ...]] = [
    *[(path,) for path in FILES],
    ("README.md",),  # relative
    ("/big.txt", 0, 100),
    ("/big.txt", 100, 50),
    ("/big.txt", 2990, 100),
    ("/big.txt", 3000, 10),
    ("/big.txt", -5, 10),
    ("/big.txt", 0, 0),
    ("/big.txt", 0, -1),
    ("/crlf.txt", 1, 1),
    ("/missing.txt",),
    ("/src",),
    ("/README.md/x",),
]


@pytest.mark.parametrize("args", READ_CASES, ids=lambda a: repr(a))
def test_read(pair: tuple[Any, Any], args: tuple[Any, ...]) -> None:
    path = args[0] if args[0].startswith("/") or args[0] == "README.md" else "/" + args[0]
    ref, ours = both(pair, "read", path, *args[1:])
    assert as_dict(ours) == as_dict(ref)


LS_CASES = ["/", "/src", "src", "/src/util", "/.hidden", "/emptydir", "/unicode", "/\u65e5\u672c", "/missing",
            "/README.md", "/missing/deeper", "/README.md/x"]


@pytest.mark.parametrize("path", LS_CASES)
def test_ls(pair: tuple[Any, Any], path: str) -> None:
    ref, ours = both(pair, "ls", path)
    assert as_dict(ours) == as_dict(ref)


GLOB_CASES: list[tuple[str, str | None]] = [
    ("*.py", None),
    ("**/*.py", None),
    ("*.yml", None),
    ("**/*.yml", None),
    (".github/**/*.yml", None),
    (".*", None),
    (".env", None),
    ("*.env", None),
    ("**/.*", None),
    ("*.txt", None),
    ("**/*", None),
    ("src/**", None),
    ("/*.md", None),
    ("*.{md,py}", None),
    ("*.py", "/src"),
    ("*", "/src"),
    ("**/*.txt", "/unicode"),
    ("*.py", "/missing"),
    ("../*", None),
    ("[a-", None),
    ("\u30d5*", None),
]


@pytest.mark.parametrize(("pattern", "path"), GLOB_CASES, ids=lambda a: repr(a))
def test_glob(pair: tuple[Any, Any], pattern: str, path: str | None) -> None:
    ref, ours = both(pair, "glob", pattern, path)
    assert as_dict(ours) == as_dict(ref)


GREP_CASES: list[tuple[str, str | None, str | None]] = [
    ("hello", None, None),
    ("hello", "/src", None),
    ("hello", None, "*.py"),
    ("hello", None, "**/*.md"),
    ("hello", None, "/*.md"),
    ("hello", None, "*.{md,txt}"),
    ("hello", None, "../x"),
    ("two", None, None),
    ("w\u00f6rld", None, None),
    ("print('hello')", None, None),
    ("SECRET", None, None),
    ("absent-pattern", None, None),
    ("hello", "/missing", None),
    ("hello", "/README.md", None),
    ("hello", "/docs/guide.md", None),
    ("line 29", "/big.txt", None),
]


@pytest.mark.parametrize(("pattern", "path", "glob"), GREP_CASES, ids=lambda a: repr(a))
def test_grep(
    pair: tuple[Any, Any], dirs: tuple[Path, Path], pattern: str, path: str | None, glob: str | None
) -> None:
    ref, ours = both(pair, "grep", pattern, path, glob)
    expected = documented_grep_of_a_file(as_dict(ref), path, dirs[0])
    assert documented_grep_order(as_dict(ours)) == documented_grep_order(expected)


def test_grep_max_count(pair: tuple[Any, Any]) -> None:
    for cap in [1, 2, 7, 100]:
        ref, ours = both(pair, "grep", "hello", None, None, max_count=cap)
        # Which matches come first depends on each one's walk order.
        assert len(ours.matches) == len(ref.matches), cap
        assert ours.truncated == ref.truncated, cap


def test_download_files(pair: tuple[Any, Any]) -> None:
    paths = ["/README.md", "/image.png", "/latin1.txt", "/missing", "/src", "/../etc/passwd"]
    ref, ours = both(pair, "download_files", paths)
    assert as_dict(ours) == as_dict(ref)


@pytest.fixture
def scratch(pair: tuple[Any, Any], dirs: tuple[Path, Path]) -> Iterator[str]:
    """A directory both sides change, removed afterwards."""
    name = f"scratch-{threading.get_ident()}"
    for root in dirs:
        (root / name).mkdir()
    yield "/" + name
    for root in dirs:
        shutil.rmtree(root / name, ignore_errors=True)


def same_tree(dirs: tuple[Path, Path], sub: str) -> None:
    """Both sides hold the same files with the same bytes below `sub`."""
    ref, ours = (Path(d) / sub.lstrip("/") for d in dirs)

    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}

    assert files(ours) == files(ref)


def test_write_edit_delete(pair: tuple[Any, Any], dirs: tuple[Path, Path], scratch: str) -> None:
    steps: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
        ("write", (f"{scratch}/a.py", "x = 1\ny = 2\nx = 1\n"), {}),
        ("write", (f"{scratch}/deep/er/b.txt", "nested\n"), {}),
        ("write", (f"{scratch}/a.py", "x = 1\ny = 2\nx = 1\n"), {}),  # overwrite
        ("edit", (f"{scratch}/a.py", "y = 2", "y = 3"), {}),
        ("edit", (f"{scratch}/a.py", "x = 1", "x = 9"), {}),  # appears twice
        ("edit", (f"{scratch}/a.py", "x = 1", "x = 9"), {"replace_all": True}),
        ("edit", (f"{scratch}/a.py", "absent", "z"), {}),
        ("edit", (f"{scratch}/a.py", "", "z"), {}),
        ("edit", (f"{scratch}/a.py", "y = 3\n\n", "z"), {}),
        ("edit", (f"{scratch}/missing.py", "a", "b"), {}),
        ("edit", (scratch, "a", "b"), {}),
        ("write", (f"{scratch}/n.txt", "last"), {}),
        ("edit", (f"{scratch}/n.txt", "last\n", "first\n"), {}),
        ("write", (f"{scratch}/u.txt", "\u00e9t\u00e9\n"), {}),
        ("edit", (f"{scratch}/u.txt", "\u00e9t\u00e9", "hiver"), {}),
        ("write", (f"{scratch}/lf.txt", "a\nb\n"), {}),
        ("edit", (f"{scratch}/lf.txt", "a\r\nb", "c\r\nd"), {}),  # CRLF in old_string
        ("delete", (f"{scratch}/deep",), {}),
        ("delete", (f"{scratch}/missing",), {}),
        ("delete", (f"{scratch}/a.py",), {}),
        ("write", (scratch, "x"), {}),  # a directory
    ]
    for method, args, kwargs in steps:
        ref, ours = (as_dict(r) for r in both(pair, method, *args, **kwargs))
        documented_os_error(ref, ours, dirs[0])
        assert ours == ref, (method, args)
    same_tree(dirs, scratch)


def test_edit_of_a_crlf_file_matches_lf_text_and_keeps_crlf(
    pair: tuple[Any, Any], dirs: tuple[Path, Path], scratch: str
) -> None:
    for root in dirs:
        (root / scratch.lstrip("/") / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    ref, ours = both(pair, "edit", f"{scratch}/w.txt", "one\ntwo", "uno\ndos")
    assert as_dict(ours) == as_dict(ref)
    assert ours.occurrences == 1
    ref_bytes, our_bytes = ((root / scratch.lstrip("/") / "w.txt").read_bytes() for root in dirs)
    # Documented: deepagents rewrites the file with LF; agentvfs keeps CRLF.
    assert ref_bytes == b"uno\ndos\nthree\n"
    assert our_bytes == b"uno\r\ndos\r\nthree\r\n"


def test_upload_files(pair: tuple[Any, Any], dirs: tuple[Path, Path], scratch: str) -> None:
    files = [
        (f"{scratch}/bin.dat", bytes(range(256)) * 64),
        (f"{scratch}/new/dir/t.txt", b"text\n"),
        (f"{scratch}/../../etc/x", b"no"),
        (scratch, b"a directory"),
    ]
    ref, ours = both(pair, "upload_files", files)
    assert as_dict(ours) == as_dict(ref)
    same_tree(dirs, scratch)


def test_async_variants_answer_as_the_sync_ones(pair: tuple[Any, Any]) -> None:
    async def run(backend: Any) -> list[Any]:
        return [
            as_dict(await backend.als("/src")),
            as_dict(await backend.aread("/big.txt", 10, 5)),
            documented_grep_order(as_dict(await backend.agrep("hello", "/src"))),
            as_dict(await backend.aglob("**/*.py")),
            as_dict(await backend.adownload_files(["/README.md", "/missing"])),
        ]

    ref, ours = pair
    assert asyncio.run(run(ours)) == asyncio.run(run(ref))


def test_concurrent_edits_are_never_lost(pair: tuple[Any, Any], dirs: tuple[Path, Path], scratch: str) -> None:
    """Eight editors append a line each through `edit`, at once. agentvfs
    keeps all eight (documented: its edits are atomic); deepagents'
    read-modify-write may lose some, so it is not compared."""
    _, ours = pair
    path = f"{scratch}/log.txt"
    assert ours.write(path, "END\n").error is None
    barrier = threading.Barrier(8)
    results: list[Any] = []

    def editor(i: int) -> None:
        barrier.wait()
        results.append(ours.edit(path, "END\n", f"line {i}\nEND\n"))

    threads = [threading.Thread(target=editor, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.error is None for r in results), [r.error for r in results]
    text = (dirs[1] / scratch.lstrip("/") / "log.txt").read_text()
    assert sorted(text.splitlines()) == sorted([f"line {i}" for i in range(8)] + ["END"])


@pytest.fixture(scope="module")
def linked(start_server: Callable[[str | None], Server]) -> Iterator[tuple[Any, Any, Path]]:
    """Both backends over a tree with links: to a file and a directory
    inside, out of the root, a loop, and to nothing."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "outside").mkdir()
        (base / "outside" / "secret.txt").write_text("secret\n")
        roots = [base / "reference", base / "served"]
        root = roots[0]
        (root / "src").mkdir(parents=True)
        (root / "src" / "main.py").write_text("print('hello')\n")
        (root / "link_file").symlink_to("src/main.py")
        (root / "link_dir").symlink_to("src")
        (root / "link_out").symlink_to(base / "outside")
        (root / "loop").symlink_to("loop")
        (root / "dangling").symlink_to("nowhere")
        shutil.copytree(root, roots[1], symlinks=True, copy_function=shutil.copy2)
        for rel in ["src/main.py", "src"]:
            st = (root / rel).stat()
            os.utime(roots[1] / rel, ns=(st.st_atime_ns, st.st_mtime_ns))
        server = start_server(f'[[mount]]\nprefix = "/"\ntier = "filesystem"\nroot = "{roots[1]}"\n')
        with Client(server.address) as client:
            yield FilesystemBackend(root_dir=roots[0], virtual_mode=True), AgentVfsBackend(client), roots[0]


def documented_links_listed_under_their_own_names(ours: dict[str, Any]) -> dict[str, Any]:
    """deepagents lists a link inside the root under its target's path (so
    `/link_dir` shows as a second `/src/`); agentvfs lists it under its own
    name, typed by its target. Map ours to the targets to compare the rest."""
    targets = {"/link_dir/": "/src/", "/link_file": "/src/main.py"}
    for entry in ours["entries"]:
        entry["path"] = targets.get(entry["path"], entry["path"])
    # A link to a directory carries no time of its own: its target's is it.
    times = {e["path"]: e["modified_at"] for e in ours["entries"] if "modified_at" in e}
    for entry in ours["entries"]:
        entry.setdefault("modified_at", times[entry["path"]])
    ours["entries"].sort(key=lambda e: e["path"])
    return ours


def documented_loop_error(error: str | None, real_root: Path) -> str | None:
    """Both report a link loop as a child error naming the link; deepagents
    names it by its real path on disk, agentvfs by its logical path, and each
    words the cause its own way."""
    if error is None:
        return None
    return error.replace(str(real_root), "").split("': ", 1)[0] + "'"


def test_links_are_followed_inside_the_root_only(linked: tuple[Any, Any, Path]) -> None:
    ref_backend, ours_backend, real_root = linked
    ref, ours = as_dict(ref_backend.ls("/")), as_dict(ours_backend.ls("/"))
    assert documented_loop_error(ours.pop("error"), real_root) == documented_loop_error(ref.pop("error"), real_root)
    assert ours["entries"] is not None
    assert [e["path"] for e in ours["entries"]] == ["/link_dir/", "/link_file", "/src/"]
    assert documented_links_listed_under_their_own_names(ours) == ref
    # Reading through a link inside the root reads its target, on both.
    assert as_dict(ours_backend.read("/link_file")) == as_dict(ref_backend.read("/link_file"))
    listed = ours_backend.ls("/link_dir").entries
    assert [e["path"] for e in listed or []] == ["/link_dir/main.py"]
    # Out of the root: deepagents raises; agentvfs answers with an error.
    with pytest.raises(ValueError, match="outside root"):
        ref_backend.read("/link_out/secret.txt")
    answer = ours_backend.read("/link_out/secret.txt")
    assert answer.error is not None and answer.error.startswith("Error reading file '/link_out/secret.txt'")
    assert "secret" not in (answer.file_data or {}).get("content", "")
    # Writes never go through a link (deepagents writes the target).
    assert ours_backend.write("/link_file", "x = 1\n").error is not None
    assert (real_root.parent / "served" / "src" / "main.py").read_text() == "print('hello')\n"


def test_the_middleware_tells_files_from_directories(pair: tuple[Any, Any]) -> None:
    """deepagents' permission middleware decides whether a delete may reach
    descendants from `ls`'s error strings: a file must read as a leaf (so a
    rule set denying directories still lets it delete an allowed file)."""
    from deepagents.middleware.filesystem import _delete_target_may_have_descendants as may_have_descendants

    for path, expected in [("/README.md", False), ("/src", True), ("/emptydir", True), ("/missing", True)]:
        answers = [may_have_descendants(b, path, permissions_configured=True) for b in pair]
        assert answers == [expected, expected], path
