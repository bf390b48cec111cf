"""`Client.watch` and `AsyncClient.watch`: changes in commit order, the end at
the head, resuming from a saved cursor, the expired-cursor error, and a
watcher that reconnects by itself across a server restart."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

import grpc
import pytest

from agentvfs import INVALID_PARAM, AgentVfsError, AsyncClient, Client
from agentvfs.v1 import filesystem_pb2 as pb

from .conftest import Server

EXPIRING = '[[mount]]\nprefix = "/"\ntier = "state"\nchange_log = 3\n'


def session() -> str:
    return f"watch-{uuid.uuid4().hex}"


def store_config(directory: str) -> str:
    """State at /, a Store at /memories whose data lies in `directory`."""
    store = Path(directory) / "store"
    return f'[[mount]]\nprefix = "/"\ntier = "state"\n\n[[mount]]\nprefix = "/memories"\ntier = "store"\npath = "{store}"\n'


def summary(events: Iterable[pb.ChangeEvent]) -> list[tuple[str, str, str]]:
    return [(pb.ChangeKind.Name(e.kind).removeprefix("CHANGE_KIND_"), e.path, e.operation) for e in events]


def test_watch_sees_changes_in_order_and_stops_at_the_head(server: Server) -> None:
    """A write, an edit and a delete come in commit order with their
    versions; with stop_at_head the loop ends; `cursor` is the last one."""
    with Client(server.address, session=session()) as c:
        w = c.filesystem.Write(pb.WriteRequest(path="/w/a.md", content="alpha\n"))
        e = c.filesystem.Edit(pb.EditRequest(path="/w/a.md", old_string="alpha", new_string="beta"))
        c.filesystem.Delete(pb.DeleteRequest(path="/w/a.md"))
        watch = c.watch("/w", stop_at_head=True)
        events = list(watch)
        assert summary(events) == [
            ("CREATED", "/w/a.md", "write"),
            ("MODIFIED", "/w/a.md", "edit"),
            ("DELETED", "/w/a.md", "delete"),
        ]
        assert [events[0].version, events[1].version] == [w.version, e.version]
        assert events[2].version > e.version and events[1].size == len("beta\n")
        assert watch.cursor == events[2].cursor != ""


def test_watch_resumes_from_a_saved_cursor(server: Server) -> None:
    """From a saved cursor come exactly the later changes; after a loop left
    early, `cursor` resumes right after the last event yielded."""
    with Client(server.address, session=session()) as c:
        for name in ("1", "2"):
            c.filesystem.Write(pb.WriteRequest(path=f"/w/{name}", content=name))
        first = c.watch("/w", stop_at_head=True)
        assert len(list(first)) == 2
        for name in ("3", "4", "5"):
            c.filesystem.Write(pb.WriteRequest(path=f"/w/{name}", content=name))
        assert [e.path for e in c.watch("/w", cursor=first.cursor, stop_at_head=True)] == ["/w/3", "/w/4", "/w/5"]
        with c.watch("/w", cursor=first.cursor, stop_at_head=True) as partial:
            assert next(iter(partial)).path == "/w/3"
        assert [e.path for e in c.watch("/w", cursor=partial.cursor, stop_at_head=True)] == ["/w/4", "/w/5"]


def test_an_expired_cursor_is_raised_without_retrying(start_server: Callable[[str | None], Server]) -> None:
    """A cursor older than the change log keeps is FAILED_PRECONDITION with
    the oldest cursor, which resumes; it and cursor+from_now are raised at
    once, never retried."""
    server = start_server(EXPIRING)
    with Client(server.address, session=session()) as c:
        c.filesystem.Write(pb.WriteRequest(path="/a", content="1"))
        watch = c.watch("/", stop_at_head=True)
        list(watch)
        for name in "bcdef":
            c.filesystem.Write(pb.WriteRequest(path=f"/{name}", content="x"))
        started = time.monotonic()
        with pytest.raises(AgentVfsError) as expired:
            list(c.watch("/", cursor=watch.cursor, stop_at_head=True))
        err = expired.value
        assert (err.grpc_code, err.code) == (grpc.StatusCode.FAILED_PRECONDITION, INVALID_PARAM)
        oldest = err.metadata["oldest_cursor"]
        assert f"the oldest cursor still available is {oldest}" in err.message
        assert [e.path for e in c.watch("/", cursor=oldest, stop_at_head=True)] == ["/d", "/e", "/f"]
        with pytest.raises(AgentVfsError) as both:
            list(c.watch("/", cursor=oldest, from_now=True, stop_at_head=True))
        assert both.value.grpc_code == grpc.StatusCode.INVALID_ARGUMENT
        # Retried, the two failures would have taken over 25 s of backoff.
        assert time.monotonic() - started < 5


async def test_async_watch_follows_resumes_and_refuses_an_expired_cursor(
    start_server: Callable[[str | None], Server],
) -> None:
    """The AsyncWatch: a following watch yields a change made after it
    started; stop_at_head ends; a saved cursor resumes; an expired cursor
    raises FAILED_PRECONDITION at once."""
    server = start_server(EXPIRING)
    async with AsyncClient(server.address, session=session()) as c:
        await c.filesystem.Write(pb.WriteRequest(path="/a", content="1"))
        caught_up = c.watch("/", stop_at_head=True)
        assert [e.path async for e in caught_up] == ["/a"]

        async def first_event() -> pb.ChangeEvent:
            async for event in c.watch("/", cursor=caught_up.cursor):
                return event
            raise AssertionError("the watch ended")

        follower = asyncio.create_task(first_event())
        await asyncio.sleep(0.1)
        b = await c.filesystem.Write(pb.WriteRequest(path="/b", content="2"))
        event = await asyncio.wait_for(follower, 10)
        assert (event.path, event.version, event.kind) == ("/b", b.version, pb.CHANGE_KIND_CREATED)

        # The log keeps 3 changes: b's cursor still resumes, a's has expired.
        for name in "cde":
            await c.filesystem.Write(pb.WriteRequest(path=f"/{name}", content="x"))
        resumed = c.watch("/", cursor=event.cursor, stop_at_head=True)
        assert [e.path async for e in resumed] == ["/c", "/d", "/e"]
        with pytest.raises(AgentVfsError) as expired:
            [e async for e in c.watch("/", cursor=caught_up.cursor, stop_at_head=True)]
        assert expired.value.grpc_code == grpc.StatusCode.FAILED_PRECONDITION
        assert expired.value.metadata["oldest_cursor"] in expired.value.message


def test_watch_resumes_across_a_server_restart() -> None:
    """A watcher follows a Store mount; the server is killed (SIGKILL) and a
    new one started on the same address and data directory; the same loop,
    reconnecting by itself, yields exactly the writes after its last event."""
    with tempfile.TemporaryDirectory() as directory:
        config = store_config(directory)
        first = Server(config, workdir=directory)
        second: Server | None = None
        events: queue.Queue[pb.ChangeEvent | BaseException] = queue.Queue()
        watcher = Client(first.address, session=session())
        watch = watcher.watch("/memories")

        def follow() -> None:
            try:
                for event in watch:
                    events.put(event)
            except BaseException as err:  # reported to the test's thread
                events.put(err)

        thread = threading.Thread(target=follow, daemon=True)
        thread.start()

        def expect(path: str, version: int) -> None:
            got = events.get(timeout=30)
            assert not isinstance(got, BaseException), got
            assert (got.path, got.version, got.kind) == (path, version, pb.CHANGE_KIND_CREATED)

        try:
            with Client(first.address) as before:
                for name in ("m1", "m2"):
                    expect(f"/memories/{name}", before.filesystem.Write(pb.WriteRequest(path=f"/memories/{name}", content=name)).version)
            cursor = watch.cursor
            first.stop()
            second = Server(config, listen=first.address, workdir=directory)
            with Client(second.address) as after:
                for name in ("m3", "m4", "m5"):
                    # gRPC shares the connection to an address between channels: wait
                    # for it to leave the backoff the killed server put it in.
                    req = pb.WriteRequest(path=f"/memories/{name}", content=name)
                    expect(f"/memories/{name}", after.filesystem.Write(req, wait_for_ready=True, timeout=30).version)
            with pytest.raises(queue.Empty):  # nothing more: no event came twice
                events.get(timeout=0.3)
            assert watch.cursor != cursor
        finally:
            watch.cancel()
            thread.join(10)
            watcher.close()
            if second is not None:
                second.stop()
            else:
                first.stop()
        ended = events.get_nowait()  # the cancel ended the loop
        assert isinstance(ended, AgentVfsError) and ended.grpc_code == grpc.StatusCode.CANCELLED, ended


async def test_async_watch_resumes_across_a_server_restart() -> None:
    """The same with the AsyncClient: the watcher task's loop reconnects by
    itself and yields exactly the writes after its last event."""
    with tempfile.TemporaryDirectory() as directory:
        config = store_config(directory)
        first = Server(config, workdir=directory)
        second: Server | None = None
        events: asyncio.Queue[pb.ChangeEvent] = asyncio.Queue()
        watcher = AsyncClient(first.address, session=session())
        watch = watcher.watch("/memories")

        async def follow() -> None:
            async for event in watch:
                await events.put(event)

        task = asyncio.create_task(follow())

        async def expect(path: str, version: int) -> None:
            got = await asyncio.wait_for(events.get(), 30)
            assert (got.path, got.version, got.kind) == (path, version, pb.CHANGE_KIND_CREATED)

        try:
            async with AsyncClient(first.address) as before:
                for name in ("m1", "m2"):
                    w = await before.filesystem.Write(pb.WriteRequest(path=f"/memories/{name}", content=name))
                    await expect(f"/memories/{name}", w.version)
            first.stop()
            second = Server(config, listen=first.address, workdir=directory)
            async with AsyncClient(second.address) as after:
                for name in ("m3", "m4", "m5"):
                    req = pb.WriteRequest(path=f"/memories/{name}", content=name)
                    w = await after.filesystem.Write(req, wait_for_ready=True, timeout=30)
                    await expect(f"/memories/{name}", w.version)
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(events.get(), 0.3)
            assert not task.done(), task
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, AgentVfsError):
                await task
            await watcher.close()
            (second or first).stop()
