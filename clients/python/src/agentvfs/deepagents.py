"""A LangChain deepagents backend on agentvfs: switch an agent's files to the
service in one line.

    from agentvfs import Client
    from agentvfs.deepagents import AgentVfsBackend

    agent = create_deep_agent(model=..., backend=AgentVfsBackend(Client("localhost:50051", session="run-1")))

`AgentVfsBackend` implements `deepagents.backends.protocol.BackendProtocol`
(deepagents 0.7): ls, read, write, edit, delete, grep, glob, upload_files,
download_files, and their async variants (the protocol's own: the sync call
on a worker thread; the gRPC channel is thread-safe).

It answers exactly as deepagents' own `FilesystemBackend(virtual_mode=True)`
does -- the same entries, windows, error strings and error codes -- except
where agentvfs deliberately does better (the client README lists each
difference and its reason; `tests/test_deepagents_parity.py` runs every case
against both and fails on any other divergence). What is only deepagents'
convention is done here, with deepagents' own functions where it has them
(the include-glob matcher, the read window, the edit's replacement and its
wording); the server keeps the semantics every client shares.
"""

from __future__ import annotations

import base64
import io
from datetime import datetime

from deepagents.backends.protocol import (
    BackendProtocol,
    DeleteResult,
    EditResult,
    FileData,
    FileDownloadResponse,
    FileInfo,
    FileOperationError,
    FileUploadResponse,
    GlobResult,
    GrepMatch,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
)
from deepagents.backends.utils import (
    InvalidGlobPatternError,
    check_empty_content,
    compile_grep_include_glob,
    perform_string_replacement,
    slice_read_response,
)
from deepagents.backends.utils import _get_backend_read_file_type as read_file_type
from google.protobuf.timestamp_pb2 import Timestamp

from agentvfs.client import Client
from agentvfs.errors import AgentVfsError, ConflictError
from agentvfs.v1 import filesystem_pb2 as pb

#: How often `edit` re-reads and retries when another writer changed the file
#: between its read and its conditional write.
EDIT_ATTEMPTS = 16


class AgentVfsBackend(BackendProtocol):
    """deepagents' BackendProtocol over an agentvfs `Client`.

    Paths are agentvfs logical paths; a path without a leading `/` is taken
    from the root, as deepagents' virtual paths are.

    Args:
        client: a connected `Client` (its session and token decide which
            files the agent sees and may change).
        root: where `grep` and `glob` search when no path is given.
    """

    def __init__(self, client: Client, *, root: str = "/") -> None:
        self.client = client
        self.root = root

    def ls(self, path: str) -> LsResult:
        """Lists one directory level: directories end with `/`, links are
        followed inside what the caller may reach, others are child errors."""
        try:
            resp = self.client.filesystem.ListInfo(pb.ListInfoRequest(path=_absolute(path)))
        except AgentVfsError as err:
            if isinstance(err, FileNotFoundError):
                return LsResult(error=f"Path '{path}': path_not_found", entries=None)
            if isinstance(err, NotADirectoryError):
                return LsResult(error=f"Path '{path}': not_a_directory", entries=None)
            return LsResult(error=f"Cannot list '{path}': {err.message}", entries=None)
        entries: list[FileInfo] = []
        errors: list[str] = []
        for entry in resp.entries:
            if not entry.is_symlink:
                entries.append(_file_info(entry))
                continue
            followed, problem = self._follow(entry)
            if followed is not None:
                entries.append(followed)
            elif problem is not None:
                errors.append(problem)
        entries.sort(key=lambda e: e["path"])
        return LsResult(error="\n".join(sorted(errors)) or None, entries=entries)

    def _follow(self, link: pb.FileInfo) -> tuple[FileInfo | None, str | None]:
        """What the link `link` leads to, as an entry under the link's own
        path; or None and, for a loop, the child error deepagents reports.
        A link out of the root or to nothing is left out, as deepagents does."""
        try:
            self.client.filesystem.ListInfo(pb.ListInfoRequest(path=link.path))
        except NotADirectoryError:
            return self._followed_file(link), None
        except AgentVfsError as err:
            if "loop" in err.message:
                return None, f"child error: cannot resolve '{link.path}': symbolic link loop"
            return None, None
        info: FileInfo = {"path": link.path + "/", "is_dir": True, "size": 0}
        return info, None

    def _followed_file(self, link: pb.FileInfo) -> FileInfo:
        """The entry of a link to a file: the target's size and time when the
        file is text the caller may read, else the bare path (as deepagents
        lists a file it cannot stat)."""
        try:
            resp = self.client.filesystem.Read(pb.ReadRequest(path=link.path, limit=1))
        except AgentVfsError:
            return {"path": link.path, "is_dir": False}
        info: FileInfo = {"path": link.path, "is_dir": False, "size": resp.size}
        if resp.HasField("modified_time"):
            info["modified_at"] = _local_iso(resp.modified_time)
        return info

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """Reads a window of lines (line endings as LF); a file whose type
        deepagents reads as binary (images, audio, video, PDFs) comes back
        whole as base64."""
        try:
            data = self._download(file_path)
        except AgentVfsError as err:
            if isinstance(err, (FileNotFoundError, IsADirectoryError)):
                return ReadResult(error=f"File '{file_path}' not found")
            return ReadResult(error=f"Error reading file '{file_path}': {err.message}")
        if read_file_type(file_path) != "text":
            encoded = base64.standard_b64encode(data).decode("ascii")
            return ReadResult(file_data=FileData(content=encoded, encoding="base64"))
        try:
            content = _universal_newlines(data.decode("utf-8"))
        except UnicodeDecodeError as err:
            return ReadResult(error=f"Error reading file '{file_path}': {err}")
        empty = check_empty_content(content)
        if empty:
            return ReadResult(file_data=FileData(content=empty, encoding="utf-8"))
        return slice_read_response(FileData(content=content, encoding="utf-8"), offset, limit)

    def _download(self, file_path: str) -> bytes:
        out = io.BytesIO()
        self.client.download(_absolute(file_path), out)
        return out.getvalue()

    def write(self, file_path: str, content: str) -> WriteResult:
        """Creates or replaces a text file (parents created as needed)."""
        try:
            self.client.filesystem.Write(pb.WriteRequest(path=_absolute(file_path), content=content))
        except AgentVfsError as err:
            return WriteResult(error=f"Error writing file '{file_path}': {err.message}")
        return WriteResult(path=file_path)

    def edit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:  # noqa: FBT001, FBT002
        """Replaces a unique occurrence (or all) of `old_string`, matching
        with CRLF and CR read as LF as deepagents does; a file written with
        CRLF keeps CRLF. A conditional write makes the edit atomic: when
        another writer got in between, it is redone on the new content, so no
        concurrent edit is ever lost."""
        path = _absolute(file_path)
        old_string = _universal_newlines(old_string)
        new_string = _universal_newlines(new_string)
        for _ in range(EDIT_ATTEMPTS):
            out = io.BytesIO()
            try:
                info = self.client.download(path, out)
            except AgentVfsError as err:
                if isinstance(err, (FileNotFoundError, IsADirectoryError)):
                    return EditResult(error=f"Error: File '{file_path}' not found")
                return EditResult(error=f"Error editing file '{file_path}': {err.message}")
            try:
                text = out.getvalue().decode("utf-8")
            except UnicodeDecodeError as err:
                return EditResult(error=f"Error editing file '{file_path}': {err}")
            result = perform_string_replacement(_universal_newlines(text), old_string, new_string, replace_all)
            if isinstance(result, str):
                return EditResult(error=result)
            new_content, occurrences = result
            if _crlf_only(text):
                new_content = new_content.replace("\n", "\r\n")
            try:
                self.client.upload(path, new_content.encode("utf-8"), if_version=info.version)
            except ConflictError:
                continue
            except AgentVfsError as err:
                return EditResult(error=f"Error editing file '{file_path}': {err.message}")
            return EditResult(path=file_path, occurrences=int(occurrences))
        return EditResult(
            error=f"Error editing file '{file_path}': it changed {EDIT_ATTEMPTS} times while being edited; try again"
        )

    def delete(self, file_path: str) -> DeleteResult:
        """Deletes a file or, recursively, a directory."""
        try:
            self.client.filesystem.Delete(pb.DeleteRequest(path=_absolute(file_path), recursive=True))
        except AgentVfsError as err:
            if isinstance(err, FileNotFoundError):
                return DeleteResult(error=f"Error: '{file_path}' not found")
            return DeleteResult(error=f"Error deleting '{file_path}': {err.message}")
        return DeleteResult(path=file_path)

    def grep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None
    ) -> GrepResult:
        """Finds a literal string in every file below `path` (hidden and
        ignored ones too, as deepagents' search does), in path order; `glob`
        filters files with deepagents' include-glob rules."""
        try:
            include = compile_grep_include_glob(glob) if glob is not None else None
        except InvalidGlobPatternError as err:
            return GrepResult(error=str(err), matches=[])
        base = _absolute(path or self.root)
        req = pb.GrepRequest(pattern=pattern, path=base, literal=True, include_hidden=True, include_ignored=True)
        matches: list[GrepMatch] = []
        search = self.client.grep(req)
        try:
            for m in search:
                if include is not None and not include(_relative(m.path, base)):
                    continue
                if max_count is not None and len(matches) >= max_count:
                    search.cancel()
                    return GrepResult(matches=matches, truncated=True)
                matches.append({"path": m.path, "line": m.line_number, "text": m.line.removesuffix("\r")})
        except AgentVfsError as err:
            if isinstance(err, (FileNotFoundError, PermissionError)):
                return GrepResult(matches=[])
            return GrepResult(error=f"Error searching path '{path or '.'}': {err.message}", matches=[])
        return GrepResult(matches=matches, truncated=_cut_short(search.summary))

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        """Finds files with deepagents' glob rules: a pattern without `/`
        matches names at any depth, `*` never matches a leading dot, `**`
        does not descend into dot-directories, an explicit dot segment
        reaches hidden paths; directories are never returned."""
        try:
            matches_pattern = compile_grep_include_glob(pattern)
        except InvalidGlobPatternError as err:
            return GlobResult(error=str(err), matches=None)
        base = _absolute(path or self.root)
        search = self.client.glob(pattern="**", path=base, include_hidden=True, include_ignored=True)
        files: list[FileInfo] = []
        try:
            for entry in search:
                if entry.is_directory or not matches_pattern(_relative(entry.path, base)):
                    continue
                if not entry.is_symlink:
                    files.append(_file_info(entry))
                    continue
                followed, _ = self._follow(entry)
                if followed is not None and not followed["is_dir"]:
                    files.append(followed)
        except AgentVfsError as err:
            if isinstance(err, (FileNotFoundError, PermissionError, NotADirectoryError)):
                return GlobResult(matches=[])
            return GlobResult(error=f"Error globbing path '{path}': {err.message}", matches=[])
        cut = _cut_short(search.summary)
        files.sort(key=lambda f: f["path"])  # deepagents' order: by path string
        return GlobResult(matches=files, truncated=cut, truncation_reason="budget" if cut else None)

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Writes each file (any size, any bytes) in chunks."""
        out = []
        for path, content in files:
            try:
                self.client.upload(_absolute(path), content)
                out.append(FileUploadResponse(path=path, error=None))
            except AgentVfsError as err:
                out.append(FileUploadResponse(path=path, error=_file_error(err)))
        return out

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Reads each file's bytes in chunks."""
        out = []
        for path in paths:
            try:
                out.append(FileDownloadResponse(path=path, content=self._download(path), error=None))
            except AgentVfsError as err:
                out.append(FileDownloadResponse(path=path, content=None, error=_file_error(err)))
        return out


def _absolute(path: str) -> str:
    """A deepagents virtual path as a logical path: relative ones start at `/`."""
    return path if path.startswith("/") else "/" + path


def _relative(path: str, base: str) -> str:
    """`path` relative to the directory `base` (both logical, absolute)."""
    if base == "/":
        return path.lstrip("/")
    return path.removeprefix(base.rstrip("/") + "/")


def _file_error(err: AgentVfsError) -> FileOperationError:
    """deepagents' code of a failed upload or download."""
    if isinstance(err, FileNotFoundError):
        return "file_not_found"
    if isinstance(err, PermissionError):
        return "permission_denied"
    if isinstance(err, IsADirectoryError):
        return "is_directory"
    return "invalid_path"


def _universal_newlines(text: str) -> str:
    """CRLF and CR as LF: how Python's text mode (and so deepagents) reads."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _crlf_only(text: str) -> bool:
    """True when every line break of `text` is CRLF (and there is one)."""
    crlf = text.count("\r\n")
    return crlf > 0 and crlf == text.count("\n") == text.count("\r")


def _file_info(e: pb.FileInfo) -> FileInfo:
    if e.is_directory:
        info: FileInfo = {"path": e.path.rstrip("/") + "/", "is_dir": True, "size": 0}
    else:
        info = {"path": e.path, "is_dir": False, "size": e.size}
    if e.HasField("modified_time"):
        info["modified_at"] = _local_iso(e.modified_time)
    return info


def _cut_short(summary: pb.SearchSummary | None) -> bool:
    return summary is not None and summary.aborted_reason != pb.ABORTED_REASON_UNSPECIFIED


def _local_iso(ts: Timestamp) -> str:
    """A time as deepagents shows modification times: local, ISO 8601, no zone."""
    # `seconds + nanos * 1e-9` is how Python computes `st_mtime` from a stat.
    return datetime.fromtimestamp(ts.seconds + ts.nanos * 1e-9).isoformat()  # noqa: DTZ006 (deepagents' format)
