"""The synchronous client.

`Client` holds one channel; `client.filesystem`, `client.tools` and
`client.access` are the generated typed stubs of every RPC, wrapped so each
call carries the token/session metadata and raises `AgentVfsError`. `grep` and
`glob` return a `Search`: iterate it for results in path order; `cancel()` (or
leaving its `with` block) stops the search on the server. `watch` returns a
`Watch`: iterate it for the changes under a path, across dropped connections
and server restarts; its `cursor` resumes it later. `create_branch`,
`with_branch`, `diff_branch`, `merge_branch` and `discard_branch` fork a
directory, work in the fork and bring it back (docs/branches.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import TracebackType
from typing import IO, Any, Generic, TypeVar, cast

import grpc

from agentvfs._common import (
    BRANCH_HEADER,
    CHANNEL_OPTIONS,
    LABEL_HEADER,
    WATCH_RETRIES,
    WatchBase,
    call_metadata,
    merge_metadata,
    rewind_request,
    upload_requests,
    watch_delay,
    with_header,
)
from agentvfs.branch import Resolution, diff_request, merge_request
from agentvfs.changeset import ChangesetOp, commit_request
from agentvfs.errors import AgentVfsError, error_from
from agentvfs.v1 import access_pb2_grpc, filesystem_pb2, filesystem_pb2_grpc, tools_pb2_grpc

T = TypeVar("T")


class _Guarded:
    """A stub whose methods add the client's metadata and raise AgentVfsError
    (streamed responses too)."""

    def __init__(self, stub: object, metadata: tuple[tuple[str, str], ...]) -> None:
        self._stub = stub
        self._metadata = metadata

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._stub, name)

        def call(request: Any, *, metadata: Iterable[tuple[str, str]] = (), **kwargs: Any) -> Any:
            try:
                result = method(request, metadata=merge_metadata(self._metadata, metadata), **kwargs)
            except grpc.RpcError as err:
                raise error_from(err) from err
            return _GuardedStream(result) if isinstance(method, grpc.UnaryStreamMultiCallable) else result

        return call


class _GuardedStream:
    """A response stream raising AgentVfsError; cancel() and the other call
    methods pass through."""

    def __init__(self, call: Any) -> None:
        self._call = call

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        try:
            return next(self._call)
        except grpc.RpcError as err:
            raise error_from(err) from err

    def __getattr__(self, name: str) -> Any:
        return getattr(self._call, name)


class Search(Generic[T]):
    """A running Grep or Glob: iterate for its results in path order; then
    `summary` holds the final counts. `cancel()` or leaving a ``with`` block
    stops it on the server."""

    def __init__(self, call: Any, items: Callable[[Any], Iterable[T]]) -> None:
        self._call = call
        self._items = items
        self.summary: filesystem_pb2.SearchSummary | None = None

    def __iter__(self) -> Iterator[T]:
        for msg in self._call:
            if msg.HasField("summary"):
                self.summary = msg.summary
            else:
                yield from self._items(msg)

    def cancel(self) -> None:
        """Stops the search; iterating further raises AgentVfsError CANCELLED."""
        self._call.cancel()

    def __enter__(self) -> Search[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class Watch(WatchBase):
    """A running Filesystem/Watch that survives dropped connections and
    server restarts: iterate it for the change events in commit order.

    When a call fails with UNAVAILABLE (the connection dropped, the server
    restarted), it calls again from `cursor` after 0.1 s, 0.2 s, ... up to
    5 s, at most `retries` times in a row (the count starts over whenever the
    server answers), so each change comes once. Every other error is raised:
    FAILED_PRECONDITION for an expired cursor (``metadata["oldest_cursor"]``
    names the oldest one left), INVALID_PARAM, ACCESS_DENIED, ... A
    ``from_now`` Watch that has received nothing yet starts from now again
    when it reconnects. `cancel()` (from any thread) or leaving its ``with``
    block stops it; iterating further raises AgentVfsError CANCELLED.
    """

    def __init__(
        self,
        stub: filesystem_pb2_grpc.FilesystemStub,
        path: str,
        cursor: str,
        from_now: bool,
        stop_at_head: bool,
        retries: int,
    ) -> None:
        super().__init__(stub, path, cursor, from_now, stop_at_head, retries, threading.Event())

    def __iter__(self) -> Iterator[filesystem_pb2.ChangeEvent]:
        failures = 0
        try:
            while True:
                try:
                    call: Any = self._stub.Watch(self._request())
                    self._call = call
                    if self._cancelled.is_set():
                        call.cancel()
                    call.initial_metadata()
                    if not call.done():  # headers and no error yet: the server took the call
                        failures = 0
                    for msg in call:
                        failures = 0
                        for event in msg.events:
                            self.cursor = event.cursor
                            yield event
                        self.cursor = msg.cursor
                    return
                except AgentVfsError as err:
                    if self._gives_up(err, failures):
                        raise
                failures += 1
                if self._cancelled.wait(watch_delay(failures)):
                    raise AgentVfsError("", grpc.StatusCode.CANCELLED, "the Watch was cancelled", {})
        finally:
            # A loop left early ends the call on the server (a no-op when it ended).
            if self._call is not None:
                self._call.cancel()

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class Client:
    """A connection to an agentvfs server.

    Args:
        address: ``host:port`` of the server, e.g. ``"localhost:50051"``.
        token: bearer token of the principal (none with the default config).
        session: the State session (``x-agentvfs-session``).
        namespace: narrows the Store namespace of a principal without one.
        label: kept with every change the client's calls make
            (``x-agentvfs-label``; 1-128 of letters, digits and
            ``-_.@+:~/#=``), for Watch, history and `rewind` to name;
            `with_label` changes it for some calls.
        branch: the branch every call works in (``x-agentvfs-branch``;
            `create_branch`, docs/branches.md); `with_branch` changes it
            for some calls.
        credentials: TLS channel credentials; plaintext when omitted.
    """

    def __init__(
        self,
        address: str,
        *,
        token: str | None = None,
        session: str | None = None,
        namespace: str | None = None,
        label: str | None = None,
        branch: str | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        if credentials is None:
            self._channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        else:
            self._channel = grpc.secure_channel(address, credentials, options=CHANNEL_OPTIONS)
        self._bind(call_metadata(token, session, namespace, label, branch))

    def _bind(self, md: tuple[tuple[str, str], ...]) -> None:
        """Makes the stubs, each call carrying `md`."""
        self._metadata = md
        #: Every Filesystem RPC, typed.
        self.filesystem = cast(
            filesystem_pb2_grpc.FilesystemStub, _Guarded(filesystem_pb2_grpc.FilesystemStub(self._channel), md)
        )
        #: Every Tools RPC, typed.
        self.tools = cast(tools_pb2_grpc.ToolsStub, _Guarded(tools_pb2_grpc.ToolsStub(self._channel), md))
        #: Every Access RPC, typed.
        self.access = cast(access_pb2_grpc.AccessStub, _Guarded(access_pb2_grpc.AccessStub(self._channel), md))

    def with_label(self, label: str) -> Client:
        """This client with the label `label` for the changes its calls
        make, sharing the channel (closing either closes both)::

            client.with_label("turn-7").commit([...])
            client.rewind("/src", label="turn-7")
        """
        return self._with(LABEL_HEADER, label)

    def with_branch(self, branch: str) -> Client:
        """This client working in the branch `branch` (``x-agentvfs-branch``;
        `create_branch`, docs/branches.md), sharing the channel (closing
        either closes both)::

            client.create_branch("try-1", "/src")
            client.with_branch("try-1").filesystem.Write(WriteRequest(path="/src/a.py", content="..."))
            client.merge_branch("try-1")
        """
        return self._with(BRANCH_HEADER, branch)

    def _with(self, key: str, value: str) -> Client:
        """A view of this client sending `key`: `value` on every call."""
        view = Client.__new__(Client)
        view._channel = self._channel
        view._bind(with_header(self._metadata, key, value))
        return view

    def grep(self, request: filesystem_pb2.GrepRequest | None = None, /, **fields: Any) -> Search[filesystem_pb2.GrepMatch]:
        """Searches file contents: ``client.grep(pattern="TODO", path="/src")``."""
        req = request if request is not None else filesystem_pb2.GrepRequest(**fields)
        return Search(self.filesystem.Grep(req), lambda msg: msg.batch.matches)

    def glob(self, request: filesystem_pb2.GlobRequest | None = None, /, **fields: Any) -> Search[filesystem_pb2.FileInfo]:
        """Finds paths by glob: ``client.glob(pattern="**/*.py", path="/")``."""
        req = request if request is not None else filesystem_pb2.GlobRequest(**fields)
        return Search(self.filesystem.Glob(req), lambda msg: msg.batch.entries)

    def watch(
        self,
        path: str = "/",
        *,
        cursor: str = "",
        from_now: bool = False,
        stop_at_head: bool = False,
        retries: int = WATCH_RETRIES,
    ) -> Watch:
        """Streams the changes under `path` in commit order: after `cursor`
        (from an event or an earlier `Watch.cursor`), from now (`from_now`),
        or from the oldest change kept; `stop_at_head` ends it once caught
        up instead of following. Reconnects by itself (see `Watch`)::

            for event in client.watch("/memories", cursor=saved):
                handle(event)
                saved = event.cursor
        """
        return Watch(self.filesystem, path, cursor, from_now, stop_at_head, retries)

    def commit(self, ops: Iterable[ChangesetOp]) -> filesystem_pb2.CommitResponse:
        """Applies `ops` (`agentvfs.WriteOp`, ...), all on one mount, as one
        changeset: in order, all or nothing. The answer's ``files`` are every
        file touched, in path order. When an operation fails nothing is
        applied and the error's ``operation_index`` names it::

            client.commit([WriteOp("/a.md", "hi\n"), MoveOp("/b.md", "/c.md")])
        """
        return self.filesystem.Commit(commit_request(ops))

    def rewind(
        self,
        path: str = "/",
        *,
        session: str | None = None,
        handle: str | None = None,
        label: str | None = None,
        changeset: str | None = None,
        since_cursor: str | None = None,
        dry_run: bool = False,
        force: bool = False,
    ) -> filesystem_pb2.RewindResponse:
        """Undoes, as one changeset, the changes under `path` that exactly
        one selector picks (else ValueError): those of a State `session`, a
        `handle`, a `label`, a `changeset` (``CommitResponse.changeset``), or
        all after `since_cursor`. Each file goes back to its content before
        the first of them (docs/changesets.md § Rewind). The answer's
        ``files`` (``from_version``, ``to_version``, ``version``,
        ``deleted``, in path order), ``diff`` (a `dry_run`'s unified diff;
        nothing changes) and ``changeset`` (the rewind's id). A file changed
        afterwards by a change not selected raises `ConflictError` and
        nothing applies, unless `force`::

            print(client.rewind("/src", label="turn-7", dry_run=True).diff)
            client.rewind("/src", label="turn-7")
        """
        req = rewind_request(path, session, handle, label, changeset, since_cursor, dry_run, force)
        return self.filesystem.Rewind(req)

    def create_branch(self, name: str, path: str) -> filesystem_pb2.Branch:
        """Forks the directory `path` (State, Store or object mount) into the
        branch `name`, copy-on-write (docs/branches.md § Fork); work in it
        through `with_branch`."""
        return self.filesystem.CreateBranch(filesystem_pb2.CreateBranchRequest(name=name, path=path)).branch

    def list_branches(self) -> list[filesystem_pb2.Branch]:
        """The caller's branches: name, root, creation time, creator, files
        changed and bytes held."""
        return list(self.filesystem.ListBranches(filesystem_pb2.ListBranchesRequest()).branches)

    def diff_branch(self, name: str, *, page_size: int = 0) -> Iterator[filesystem_pb2.BranchFileDiff]:
        """The files the branch changed against its base now, in path order
        (``kind``: added, changed, deleted or moved; ``diff``: unified),
        asking for the next page of `page_size` (0: the server's 1000) as
        the loop goes on::

            for d in client.diff_branch("try-1"):
                print(d.kind, d.path)
        """
        after = ""
        while True:
            page = self.filesystem.DiffBranch(diff_request(name, after, page_size))
            yield from page.files
            after = page.next_after
            if not after:
                return

    def merge_branch(
        self, name: str, *, resolutions: Mapping[str, Resolution] | None = None, discard: bool = False
    ) -> filesystem_pb2.MergeBranchResponse:
        """Merges the branch into its base as one changeset, three-way
        (docs/branches.md § Merge); `discard` deletes the branch once
        applied. Files that do not merge are answered in ``conflicts``, each
        with its three versions (``ancestor``, ``branch``, ``base``; unset
        when there was no file), and nothing is applied: merge again with a
        resolution per path (new content, or `agentvfs.DELETE`)::

            res = client.merge_branch("try-1")
            fixes = {c.path: settle(c.ancestor, c.branch, c.base) for c in res.conflicts}
            client.merge_branch("try-1", resolutions=fixes, discard=True)
        """
        return self.filesystem.MergeBranch(merge_request(name, resolutions, discard))

    def discard_branch(self, name: str) -> None:
        """Deletes the branch and everything it holds; the base is untouched."""
        self.filesystem.DiscardBranch(filesystem_pb2.DiscardBranchRequest(name=name))

    def upload(
        self,
        path: str,
        data: bytes | IO[bytes] | Iterable[bytes],
        *,
        create_only: bool = False,
        if_version: int | None = None,
    ) -> filesystem_pb2.WriteBytesResponse:
        """Writes bytes, a binary file object or an iterable of chunks to
        `path` in 1 MiB messages."""
        return self.filesystem.WriteBytes(upload_requests(path, data, create_only, if_version))

    def download(self, path: str, out: IO[bytes], *, version: int | None = None) -> filesystem_pb2.FileInfo:
        """Writes the file at `path` (or its retained `version`) into `out`
        as its chunks arrive and returns its metadata."""
        info = filesystem_pb2.FileInfo()
        for msg in self.filesystem.ReadBytes(filesystem_pb2.ReadBytesRequest(path=path, version=version)):
            if msg.HasField("info"):
                info = msg.info
            out.write(msg.data)
        return info

    def close(self) -> None:
        """Closes the channel."""
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
