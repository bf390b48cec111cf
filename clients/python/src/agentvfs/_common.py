"""What the sync and asyncio clients share: metadata, watching, chunking
(errors: `agentvfs.errors`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO, Any, Final

import grpc

from agentvfs.errors import AgentVfsError
from agentvfs.v1 import filesystem_pb2

#: Metadata key of the State session.
SESSION_HEADER: Final = "x-agentvfs-session"
#: Metadata key narrowing the Store namespace.
NAMESPACE_HEADER: Final = "x-agentvfs-namespace"
#: Metadata key of the label kept with every change a call makes.
LABEL_HEADER: Final = "x-agentvfs-label"
#: Metadata key of the branch a call works in.
BRANCH_HEADER: Final = "x-agentvfs-branch"
#: Bytes per upload message: few messages per file, far below gRPC's 4 MiB limit.
CHUNK_BYTES: Final = 1 << 20
#: Largest message the clients accept: a Read of a large text file is one message.
MAX_MESSAGE_BYTES: Final = 256 << 20
#: Channel options of both clients.
CHANNEL_OPTIONS: Final = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]


def call_metadata(
    token: str | None,
    session: str | None,
    namespace: str | None,
    label: str | None = None,
    branch: str | None = None,
) -> tuple[tuple[str, str], ...]:
    """The metadata every call carries."""
    md = []
    if token:
        md.append(("authorization", f"Bearer {token}"))
    if session:
        md.append((SESSION_HEADER, session))
    if namespace:
        md.append((NAMESPACE_HEADER, namespace))
    if label:
        md.append((LABEL_HEADER, label))
    if branch:
        md.append((BRANCH_HEADER, branch))
    return tuple(md)


def with_header(metadata: tuple[tuple[str, str], ...], key: str, value: str) -> tuple[tuple[str, str], ...]:
    """`metadata` with its `key` (`LABEL_HEADER`, `BRANCH_HEADER`) replaced
    by `value`."""
    return tuple(kv for kv in metadata if kv[0] != key) + ((key, value),)


def merge_metadata(
    client: tuple[tuple[str, str], ...], call: Iterable[tuple[str, str]]
) -> tuple[tuple[str, str], ...]:
    """A call's metadata: the client's, but a key the call passes itself
    (``metadata=[(LABEL_HEADER, "turn-7")]``) replaces the client's."""
    own = tuple(call)
    keys = {k for k, _ in own}
    return tuple(kv for kv in client if kv[0] not in keys) + own


def rewind_request(
    path: str,
    session: str | None,
    handle: str | None,
    label: str | None,
    changeset: str | None,
    since_cursor: str | None,
    dry_run: bool,
    force: bool,
) -> filesystem_pb2.RewindRequest:
    """The RewindRequest of `Client.rewind`; exactly one selector, else
    ValueError before any call."""
    selectors = {
        "session": session,
        "handle": handle,
        "label": label,
        "changeset": changeset,
        "since_cursor": since_cursor,
    }
    given = {k: v for k, v in selectors.items() if v is not None}
    if len(given) != 1:
        raise ValueError(
            "rewind takes exactly one of session, handle, label, changeset or since_cursor; "
            f"got {', '.join(given) or 'none'}"
        )
    return filesystem_pb2.RewindRequest(path=path, dry_run=dry_run, force=force, **given)


#: Reconnects in a row a Watch makes (each failing with UNAVAILABLE) before
#: it raises; the count starts over whenever the server answers.
WATCH_RETRIES: Final = 10
#: Delay before a Watch's first reconnect, doubling up to `WATCH_MAX_DELAY`.
WATCH_FIRST_DELAY: Final = 0.1
WATCH_MAX_DELAY: Final = 5.0


def watch_delay(failures: int) -> float:
    """Seconds to wait before reconnect number `failures` (1, 2, ...)."""
    return min(WATCH_FIRST_DELAY * float(2 ** min(failures - 1, 16)), WATCH_MAX_DELAY)


def watch_request(
    path: str, cursor: str, start_cursor: str, from_now: bool, stop_at_head: bool
) -> filesystem_pb2.WatchRequest:
    """The request of one Watch call: from `cursor`, or where the caller
    asked (`start_cursor`, `from_now`) while nothing was received."""
    req = filesystem_pb2.WatchRequest(path=path, cursor=cursor, stop_at_head=stop_at_head)
    if cursor == start_cursor:
        req.from_now = from_now
    return req


def retryable(err: AgentVfsError) -> bool:
    """A Watch reconnects after these only: the connection dropped or the
    server is restarting."""
    return err.grpc_code == grpc.StatusCode.UNAVAILABLE


class WatchBase:
    """What `Watch` and `AsyncWatch` share: their arguments, the cursor to
    resume from, when to give up, and `cancel()`. `cancelled` is a
    `threading.Event` or an `asyncio.Event` (both have ``set`` and
    ``is_set``)."""

    def __init__(
        self,
        stub: Any,
        path: str,
        cursor: str,
        from_now: bool,
        stop_at_head: bool,
        retries: int,
        cancelled: Any,
    ) -> None:
        self._stub = stub
        self._path = path
        self._start = cursor
        self._from_now = from_now
        self._stop_at_head = stop_at_head
        self._retries = retries
        self._cancelled = cancelled
        self._call: Any = None
        #: Resumes after the last event yielded (set before it is yielded),
        #: or further, past changes the caller may not see; the `cursor`
        #: argument before any. Persist it to resume later.
        self.cursor = cursor

    def _request(self) -> filesystem_pb2.WatchRequest:
        return watch_request(self._path, self.cursor, self._start, self._from_now, self._stop_at_head)

    def _gives_up(self, err: AgentVfsError, failures: int) -> bool:
        """True when `err` after `failures` reconnects in a row ends the Watch."""
        return not retryable(err) or self._cancelled.is_set() or failures >= self._retries

    def cancel(self) -> None:
        """Stops the Watch; iterating further raises (see the class)."""
        self._cancelled.set()
        if self._call is not None:
            self._call.cancel()


def upload_requests(
    path: str, data: bytes | IO[bytes] | Iterable[bytes], create_only: bool, if_version: int | None
) -> Iterator[filesystem_pb2.WriteBytesRequest]:
    """A WriteBytes stream: the header, then `data` in `CHUNK_BYTES` pieces,
    read lazily from a file or an iterable so a large file is never whole in
    memory."""
    header = filesystem_pb2.WriteBytesHeader(path=path, create_only=create_only)
    if if_version is not None:
        header.if_version = if_version
    yield filesystem_pb2.WriteBytesRequest(header=header)
    for chunk in _chunks(data):
        yield filesystem_pb2.WriteBytesRequest(data=chunk)


def _chunks(data: bytes | IO[bytes] | Iterable[bytes]) -> Iterator[bytes]:
    if isinstance(data, (bytes, bytearray, memoryview)):
        view = memoryview(data)
        for start in range(0, len(view), CHUNK_BYTES):
            yield bytes(view[start : start + CHUNK_BYTES])
    elif hasattr(data, "read"):
        while chunk := data.read(CHUNK_BYTES):
            yield chunk
    else:
        for piece in data:
            view = memoryview(piece)
            for start in range(0, len(view), CHUNK_BYTES):
                yield bytes(view[start : start + CHUNK_BYTES])
