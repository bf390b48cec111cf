"""The synchronous client.

`Client` holds one channel; `client.filesystem`, `client.tools` and
`client.access` are the generated typed stubs of every RPC, wrapped so each
call carries the token/session metadata and raises `AgentVfsError`. `grep` and
`glob` return a `Search`: iterate it for results in path order; `cancel()` (or
leaving its `with` block) stops the search on the server. `watch` returns a
`Watch`: iterate it for the changes under a path, across dropped connections
and server restarts; its `cursor` resumes it later.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import IO, Any, Generic, TypeVar, cast

import grpc

from agentvfs._common import (
    CHANNEL_OPTIONS,
    WATCH_RETRIES,
    WatchBase,
    call_metadata,
    upload_requests,
    watch_delay,
)
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
                result = method(request, metadata=self._metadata + tuple(metadata), **kwargs)
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
        credentials: TLS channel credentials; plaintext when omitted.
    """

    def __init__(
        self,
        address: str,
        *,
        token: str | None = None,
        session: str | None = None,
        namespace: str | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        if credentials is None:
            self._channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        else:
            self._channel = grpc.secure_channel(address, credentials, options=CHANNEL_OPTIONS)
        md = call_metadata(token, session, namespace)
        #: Every Filesystem RPC, typed.
        self.filesystem = cast(
            filesystem_pb2_grpc.FilesystemStub, _Guarded(filesystem_pb2_grpc.FilesystemStub(self._channel), md)
        )
        #: Every Tools RPC, typed.
        self.tools = cast(tools_pb2_grpc.ToolsStub, _Guarded(tools_pb2_grpc.ToolsStub(self._channel), md))
        #: Every Access RPC, typed.
        self.access = cast(access_pb2_grpc.AccessStub, _Guarded(access_pb2_grpc.AccessStub(self._channel), md))

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
