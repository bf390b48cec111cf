"""The synchronous client.

`Client` holds one channel; `client.filesystem`, `client.tools` and
`client.access` are the generated typed stubs of every RPC, wrapped so each
call carries the token/session metadata and raises `AgentVfsError`. `grep` and
`glob` return a `Search`: iterate it for results in path order; `cancel()` (or
leaving its `with` block) stops the search on the server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import IO, Any, Generic, TypeVar, cast

import grpc

from agentvfs._common import CHANNEL_OPTIONS, call_metadata, error_from, upload_requests
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

    def download(self, path: str, out: IO[bytes]) -> filesystem_pb2.FileInfo:
        """Writes the file at `path` into `out` as its chunks arrive and
        returns its metadata."""
        info = filesystem_pb2.FileInfo()
        for msg in self.filesystem.ReadBytes(filesystem_pb2.ReadBytesRequest(path=path)):
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
