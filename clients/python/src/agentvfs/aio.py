"""The asyncio client: `AsyncClient`, the same surface as `Client` with
``await`` and ``async for``.

Cancelling the task that iterates a search (or calling `AsyncSearch.cancel`,
or leaving its ``async with`` block) cancels the call, which stops the search
on the server. `AsyncWatch` is `Watch` for ``async for``, cancelled the same
way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from types import TracebackType
from typing import IO, Any, Generic, TypeVar, cast

import grpc
import grpc.aio

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


class _AsyncGuarded:
    """A stub whose methods add the client's metadata and raise AgentVfsError."""

    def __init__(self, stub: object, metadata: tuple[tuple[str, str], ...]) -> None:
        self._stub = stub
        self._metadata = metadata

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._stub, name)

        def call(request: Any, *, metadata: Iterable[tuple[str, str]] = (), **kwargs: Any) -> Any:
            call = method(request, metadata=merge_metadata(self._metadata, metadata), **kwargs)
            if isinstance(method, grpc.aio.UnaryStreamMultiCallable):
                return _AsyncGuardedStream(call)
            return _guarded_result(call)

        return call


async def _guarded_result(call: Any) -> Any:
    try:
        return await call
    except grpc.aio.AioRpcError as err:
        raise error_from(err) from err


class _AsyncGuardedStream:
    """A response stream raising AgentVfsError; cancel() passes through."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._messages = call.__aiter__()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._messages.__anext__()
        except grpc.aio.AioRpcError as err:
            raise error_from(err) from err

    def __getattr__(self, name: str) -> Any:
        return getattr(self._call, name)


class AsyncSearch(Generic[T]):
    """A running Grep or Glob: ``async for`` its results; then `summary`."""

    def __init__(self, call: Any, items: Callable[[Any], Iterable[T]]) -> None:
        self._call = call
        self._items = items
        self.summary: filesystem_pb2.SearchSummary | None = None

    async def __aiter__(self) -> AsyncIterator[T]:
        try:
            async for msg in self._call:
                if msg.HasField("summary"):
                    self.summary = msg.summary
                else:
                    for item in self._items(msg):
                        yield item
        finally:
            if self.summary is None:
                # The consumer stopped early or its task was cancelled.
                self._call.cancel()

    def cancel(self) -> None:
        """Stops the search; iterating further raises asyncio.CancelledError
        (grpc.aio's way to report a cancelled call)."""
        self._call.cancel()

    async def __aenter__(self) -> AsyncSearch[T]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()


class AsyncWatch(WatchBase):
    """A running Filesystem/Watch for ``async for``, reconnecting as `Watch`
    does (UNAVAILABLE only, 0.1 s doubling up to 5 s, `retries` in a row);
    `cursor` resumes it later. Cancelling the iterating task, `cancel()` or
    leaving its ``async with`` block stops it; iterating further raises
    asyncio.CancelledError (grpc.aio's way to report a cancelled call)."""

    def __init__(
        self,
        stub: filesystem_pb2_grpc.FilesystemAsyncStub,
        path: str,
        cursor: str,
        from_now: bool,
        stop_at_head: bool,
        retries: int,
    ) -> None:
        super().__init__(stub, path, cursor, from_now, stop_at_head, retries, asyncio.Event())

    async def __aiter__(self) -> AsyncIterator[filesystem_pb2.ChangeEvent]:
        failures = 0
        try:
            while True:
                try:
                    call: Any = self._stub.Watch(self._request())
                    self._call = call
                    if self._cancelled.is_set():
                        call.cancel()
                    await call.initial_metadata()
                    if not call.done():  # headers and no error yet: the server took the call
                        failures = 0
                    async for msg in call:
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
                try:
                    await asyncio.wait_for(self._cancelled.wait(), watch_delay(failures))
                except TimeoutError:
                    continue
                raise asyncio.CancelledError
        finally:
            # A loop left early or a cancelled task ends the call on the
            # server (a no-op when it ended).
            if self._call is not None:
                self._call.cancel()

    async def __aenter__(self) -> AsyncWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()


class AsyncClient:
    """A connection to an agentvfs server, for asyncio. Arguments as `Client`."""

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
            self._channel = grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
        else:
            self._channel = grpc.aio.secure_channel(address, credentials, options=CHANNEL_OPTIONS)
        self._bind(call_metadata(token, session, namespace, label, branch))

    def _bind(self, md: tuple[tuple[str, str], ...]) -> None:
        """Makes the stubs, each call carrying `md`."""
        self._metadata = md
        #: Every Filesystem RPC, typed.
        self.filesystem = cast(
            "filesystem_pb2_grpc.FilesystemAsyncStub",
            _AsyncGuarded(filesystem_pb2_grpc.FilesystemStub(self._channel), md),
        )
        #: Every Tools RPC, typed.
        self.tools = cast("tools_pb2_grpc.ToolsAsyncStub", _AsyncGuarded(tools_pb2_grpc.ToolsStub(self._channel), md))
        #: Every Access RPC, typed.
        self.access = cast(
            "access_pb2_grpc.AccessAsyncStub", _AsyncGuarded(access_pb2_grpc.AccessStub(self._channel), md)
        )

    def with_label(self, label: str) -> AsyncClient:
        """This client with the label `label` for the changes its calls
        make, sharing the channel, as `Client.with_label`."""
        return self._with(LABEL_HEADER, label)

    def with_branch(self, branch: str) -> AsyncClient:
        """This client working in the branch `branch`, sharing the channel,
        as `Client.with_branch`."""
        return self._with(BRANCH_HEADER, branch)

    def _with(self, key: str, value: str) -> AsyncClient:
        """A view of this client sending `key`: `value` on every call."""
        view = AsyncClient.__new__(AsyncClient)
        view._channel = self._channel
        view._bind(with_header(self._metadata, key, value))
        return view

    def grep(
        self, request: filesystem_pb2.GrepRequest | None = None, /, **fields: Any
    ) -> AsyncSearch[filesystem_pb2.GrepMatch]:
        """Searches file contents: ``async for m in client.grep(pattern="x")``."""
        req = request if request is not None else filesystem_pb2.GrepRequest(**fields)
        return AsyncSearch(self.filesystem.Grep(req), lambda msg: msg.batch.matches)

    def glob(
        self, request: filesystem_pb2.GlobRequest | None = None, /, **fields: Any
    ) -> AsyncSearch[filesystem_pb2.FileInfo]:
        """Finds paths by glob."""
        req = request if request is not None else filesystem_pb2.GlobRequest(**fields)
        return AsyncSearch(self.filesystem.Glob(req), lambda msg: msg.batch.entries)

    def watch(
        self,
        path: str = "/",
        *,
        cursor: str = "",
        from_now: bool = False,
        stop_at_head: bool = False,
        retries: int = WATCH_RETRIES,
    ) -> AsyncWatch:
        """Streams the changes under `path`, as `Client.watch`:
        ``async for event in client.watch("/memories", cursor=saved)``."""
        return AsyncWatch(self.filesystem, path, cursor, from_now, stop_at_head, retries)

    async def commit(self, ops: Iterable[ChangesetOp]) -> filesystem_pb2.CommitResponse:
        """Applies `ops` as one changeset, as `Client.commit`:
        ``await client.commit([WriteOp("/a.md", "hi\n")])``."""
        return await self.filesystem.Commit(commit_request(ops))

    async def rewind(
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
        """Undoes the changes one selector picks as one changeset, as
        `Client.rewind`: ``await client.rewind("/src", label="turn-7")``."""
        req = rewind_request(path, session, handle, label, changeset, since_cursor, dry_run, force)
        return await self.filesystem.Rewind(req)

    async def create_branch(self, name: str, path: str) -> filesystem_pb2.Branch:
        """Forks the directory `path` into the branch `name`, as
        `Client.create_branch`."""
        return (await self.filesystem.CreateBranch(filesystem_pb2.CreateBranchRequest(name=name, path=path))).branch

    async def list_branches(self) -> list[filesystem_pb2.Branch]:
        """The caller's branches, as `Client.list_branches`."""
        return list((await self.filesystem.ListBranches(filesystem_pb2.ListBranchesRequest())).branches)

    async def diff_branch(self, name: str, *, page_size: int = 0) -> AsyncIterator[filesystem_pb2.BranchFileDiff]:
        """The files the branch changed, page after page, as
        `Client.diff_branch`: ``async for d in client.diff_branch("try-1")``."""
        after = ""
        while True:
            page = await self.filesystem.DiffBranch(diff_request(name, after, page_size))
            for d in page.files:
                yield d
            after = page.next_after
            if not after:
                return

    async def merge_branch(
        self, name: str, *, resolutions: Mapping[str, Resolution] | None = None, discard: bool = False
    ) -> filesystem_pb2.MergeBranchResponse:
        """Merges the branch into its base as one changeset, as
        `Client.merge_branch`; conflicts come with their three versions and
        nothing is applied."""
        return await self.filesystem.MergeBranch(merge_request(name, resolutions, discard))

    async def discard_branch(self, name: str) -> None:
        """Deletes the branch and everything it holds, as `Client.discard_branch`."""
        await self.filesystem.DiscardBranch(filesystem_pb2.DiscardBranchRequest(name=name))

    async def upload(
        self,
        path: str,
        data: bytes | IO[bytes] | Iterable[bytes],
        *,
        create_only: bool = False,
        if_version: int | None = None,
    ) -> filesystem_pb2.WriteBytesResponse:
        """Writes bytes, a binary file object or an iterable of chunks to
        `path` in 1 MiB messages."""
        return await self.filesystem.WriteBytes(upload_requests(path, data, create_only, if_version))

    async def download(self, path: str, out: IO[bytes], *, version: int | None = None) -> filesystem_pb2.FileInfo:
        """Writes the file at `path` (or its retained `version`) into `out`
        as its chunks arrive and returns its metadata."""
        info = filesystem_pb2.FileInfo()
        async for msg in self.filesystem.ReadBytes(filesystem_pb2.ReadBytesRequest(path=path, version=version)):
            if msg.HasField("info"):
                info = msg.info
            out.write(msg.data)
        return info

    async def close(self) -> None:
        """Closes the channel."""
        await self._channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
