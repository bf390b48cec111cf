"""A LangChain deepagents backend on agentvfs: switch an agent's files to the
service in one line.

    from agentvfs import Client
    from agentvfs.deepagents import AgentVfsBackend

    agent = create_deep_agent(model=..., backend=AgentVfsBackend(Client("localhost:50051", session="run-1")))

`AgentVfsBackend` implements `deepagents.backends.protocol.BackendProtocol`
(deepagents 0.7): ls, read, write, edit, delete, grep, glob, upload_files,
download_files. Their async variants are the protocol's own (the sync call
on a worker thread; the gRPC channel is thread-safe). Failures come back as
the protocol's result objects with an error string, never as exceptions,
because a model reads them; uploads and downloads use the protocol's
standard codes (``file_not_found``, ``permission_denied``, ``is_directory``,
``invalid_path``).
"""

from __future__ import annotations

import base64
import io

from deepagents.backends.protocol import (
    BackendProtocol,
    DeleteResult,
    EditResult,
    FileData,
    FileDownloadResponse,
    FileInfo,
    FileUploadResponse,
    GlobResult,
    GrepMatch,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
)
from google.protobuf.timestamp_pb2 import Timestamp

from agentvfs._common import ACCESS_DENIED, BINARY_FILE, INVALID_PARAM, IS_DIRECTORY, NOT_FOUND, AgentVfsError
from agentvfs.client import Client
from agentvfs.v1 import filesystem_pb2 as pb

#: Protocol error codes of upload/download by envelope code.
_FILE_ERRORS = {
    NOT_FOUND: "file_not_found",
    ACCESS_DENIED: "permission_denied",
    IS_DIRECTORY: "is_directory",
    INVALID_PARAM: "invalid_path",
}


class AgentVfsBackend(BackendProtocol):
    """deepagents' BackendProtocol over an agentvfs `Client`.

    Args:
        client: a connected `Client` (its session and token decide which
            files the agent sees and may change).
        root: where `grep` and `glob` search when no path is given.
    """

    def __init__(self, client: Client, *, root: str = "/") -> None:
        self.client = client
        self.root = root

    def ls(self, path: str) -> LsResult:
        """Lists one directory level, directories flagged."""
        try:
            resp = self.client.filesystem.ListInfo(pb.ListInfoRequest(path=path))
        except AgentVfsError as err:
            return LsResult(error=err.message)
        return LsResult(entries=[_file_info(e) for e in resp.entries])

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """Reads a window of raw lines; a binary file comes back base64."""
        offset = max(offset, 0)
        if limit <= 0:
            return ReadResult(file_data={"content": "", "encoding": "utf-8"}, no_lines_requested=True)
        try:
            resp = self.client.filesystem.Read(pb.ReadRequest(path=file_path, offset=offset, limit=limit))
        except AgentVfsError as err:
            if err.code == BINARY_FILE:
                return self._read_binary(file_path)
            return ReadResult(error=err.message)
        if resp.total_lines == 0:  # the middleware shows its own empty-file reminder
            return ReadResult(file_data={"content": "", "encoding": "utf-8"})
        data: FileData = {"content": resp.content, "encoding": "utf-8", "modified_at": _iso(resp.modified_time)}
        end = offset + resp.lines_returned
        return ReadResult(
            file_data=data,
            total_lines=resp.total_lines,
            start_line=offset + 1,
            end_line=end,
            next_offset=end if end < resp.total_lines else None,
        )

    def _read_binary(self, file_path: str) -> ReadResult:
        out = io.BytesIO()
        try:
            self.client.download(file_path, out)
        except AgentVfsError as err:
            return ReadResult(error=err.message)
        return ReadResult(file_data={"content": base64.b64encode(out.getvalue()).decode(), "encoding": "base64"})

    def write(self, file_path: str, content: str) -> WriteResult:
        """Creates or replaces a text file."""
        try:
            resp = self.client.filesystem.Write(pb.WriteRequest(path=file_path, content=content))
        except AgentVfsError as err:
            return WriteResult(error=err.message)
        return WriteResult(path=resp.path)

    def edit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:  # noqa: FBT001, FBT002
        """Replaces a unique occurrence (or all) of `old_string`."""
        req = pb.EditRequest(path=file_path, old_string=old_string, new_string=new_string, replace_all=replace_all)
        try:
            resp = self.client.filesystem.Edit(req)
        except AgentVfsError as err:
            return EditResult(error=err.message)
        return EditResult(path=resp.path, occurrences=resp.replacements_made)

    def delete(self, file_path: str) -> DeleteResult:
        """Deletes a file or, recursively, a directory."""
        try:
            resp = self.client.filesystem.Delete(pb.DeleteRequest(path=file_path, recursive=True))
        except AgentVfsError as err:
            return DeleteResult(error=err.message)
        return DeleteResult(path=resp.path)

    def grep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None
    ) -> GrepResult:
        """Searches for a literal string; `truncated` when a cap or budget cut it short."""
        req = pb.GrepRequest(pattern=pattern, path=path or self.root, glob=glob or "", literal=True)
        if max_count is not None:
            req.max_results = max_count + 1  # one more tells "exactly max_count" from "more"
        matches: list[GrepMatch] = []
        search = self.client.grep(req)
        try:
            for m in search:
                matches.append({"path": m.path, "line": m.line_number, "text": m.line})
        except AgentVfsError as err:
            return GrepResult(error=err.message)
        if max_count is not None and len(matches) > max_count:
            return GrepResult(matches=matches[:max_count], truncated=True)
        return GrepResult(matches=matches, truncated=_cut_short(search.summary))

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        """Finds files: a pattern without ``/`` matches names at any depth, a
        leading ``/`` anchors it at `path`; directories are never returned."""
        if pattern.startswith("/"):
            pattern = pattern.lstrip("/")
        elif "/" not in pattern:
            pattern = f"**/{pattern}"
        search = self.client.glob(pattern=pattern, path=path or self.root)
        try:
            files = [_file_info(e) for e in search if not e.is_directory]
        except AgentVfsError as err:
            return GlobResult(error=err.message)
        cut = _cut_short(search.summary)
        return GlobResult(matches=files, truncated=cut, truncation_reason="budget" if cut else None)

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Writes each file (any size, any bytes) in chunks."""
        out = []
        for path, content in files:
            try:
                self.client.upload(path, content)
                out.append(FileUploadResponse(path=path))
            except AgentVfsError as err:
                out.append(FileUploadResponse(path=path, error=_FILE_ERRORS.get(err.code, err.message)))
        return out

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Reads each file's bytes in chunks."""
        out = []
        for path in paths:
            buf = io.BytesIO()
            try:
                self.client.download(path, buf)
                out.append(FileDownloadResponse(path=path, content=buf.getvalue()))
            except AgentVfsError as err:
                out.append(FileDownloadResponse(path=path, error=_FILE_ERRORS.get(err.code, err.message)))
        return out


def _file_info(e: pb.FileInfo) -> FileInfo:
    info: FileInfo = {"path": e.path, "is_dir": e.is_directory, "size": e.size}
    if e.HasField("modified_time"):
        info["modified_at"] = _iso(e.modified_time)
    return info


def _cut_short(summary: pb.SearchSummary | None) -> bool:
    return summary is not None and summary.aborted_reason != pb.ABORTED_REASON_UNSPECIFIED


def _iso(ts: Timestamp) -> str:
    return ts.ToDatetime().isoformat() + "Z"
