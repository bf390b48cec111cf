"""What the wrappers add over the stubs: metadata, errors, cancellation, chunking."""

from __future__ import annotations

import io
import uuid

import grpc
import pytest

from agentvfs import (
    CONFLICT,
    INVALID_PARAM,
    NOT_FOUND,
    AgentVfsError,
    AsyncClient,
    Client,
    DeleteOp,
    Edit,
    EditOp,
    MoveOp,
    MultiEditOp,
    WriteOp,
)
from agentvfs.v1 import filesystem_pb2 as pb

from .conftest import Server


def session() -> str:
    return f"client-{uuid.uuid4().hex}"


def test_errors_carry_envelope_code_and_metadata(server: Server) -> None:
    """A failed call raises AgentVfsError with the ErrorInfo reason and metadata."""
    with Client(server.address, session=session()) as c:
        v1 = c.filesystem.Write(pb.WriteRequest(path="/v.txt", content="1")).version
        c.filesystem.Write(pb.WriteRequest(path="/v.txt", content="2"))
        with pytest.raises(AgentVfsError) as caught:
            c.filesystem.Write(pb.WriteRequest(path="/v.txt", content="3", if_version=v1))
        err = caught.value
        assert (err.code, err.grpc_code) == (CONFLICT, grpc.StatusCode.ABORTED)
        assert err.metadata["expected_version"] == str(v1)
        with pytest.raises(AgentVfsError) as missing:
            list(c.filesystem.ReadBytes(pb.ReadBytesRequest(path="/nope")))
        assert missing.value.code == NOT_FOUND


def test_sessions_come_from_the_client(server: Server) -> None:
    """Two clients with different sessions see different State files."""
    with Client(server.address, session=session()) as a, Client(server.address, session=session()) as b:
        a.filesystem.Write(pb.WriteRequest(path="/mine.txt", content="a"))
        with pytest.raises(AgentVfsError) as caught:
            b.filesystem.Stat(pb.StatRequest(path="/mine.txt"))
        assert caught.value.code == NOT_FOUND


def test_leaving_a_search_block_cancels_it(server: Server) -> None:
    """A search left early is cancelled: iterating further raises CANCELLED."""
    with Client(server.address, session=session()) as c:
        c.upload("/many.txt", b"needle\n" * 200_000)
        with c.grep(pattern="needle", path="/") as search:
            first = next(iter(search))
        assert first.line == "needle"
        with pytest.raises(AgentVfsError) as caught:
            list(search)
        assert caught.value.grpc_code == grpc.StatusCode.CANCELLED and caught.value.code == ""


def test_upload_streams_a_file_object_and_download_writes_one(server: Server) -> None:
    """upload reads a file object lazily; download writes chunks into one."""
    data = bytes(range(256)) * 10_000
    with Client(server.address, session=session()) as c:
        resp = c.upload("/f.bin", io.BytesIO(data), create_only=True)
        assert (resp.bytes_written, resp.created) == (len(data), True)
        out = io.BytesIO()
        info = c.download("/f.bin", out)
        assert (info.size, out.getvalue()) == (len(data), data)


async def test_async_client_searches_and_cancels(server: Server) -> None:
    """The AsyncClient streams results; breaking out of the loop cancels the call."""
    async with AsyncClient(server.address, session=session()) as c:
        await c.upload("/a.txt", b"hit\n" * 100_000)
        search = c.grep(pattern="hit", path="/")
        async for m in search:
            assert m.line_number == 1
            break
        assert search.summary is None
        done = c.glob(pattern="*.txt", path="/")
        assert [e.path async for e in done] == ["/a.txt"]
        assert done.summary is not None and done.summary.matched == 1
        with pytest.raises(AgentVfsError) as caught:
            await c.filesystem.Stat(pb.StatRequest(path="/missing"))
        assert caught.value.code == NOT_FOUND


def test_move_renames_a_file_and_a_tree(server: Server) -> None:
    """Move through the typed stub: if_version is the source's, create_only the
    destination's; conflicts and a move across mounts raise AgentVfsError."""
    with Client(server.address, session=session()) as c:
        v1 = c.filesystem.Write(pb.WriteRequest(path="/a.txt", content="alpha")).version
        c.filesystem.Write(pb.WriteRequest(path="/b.txt", content="beta"))
        with pytest.raises(AgentVfsError) as taken:
            c.filesystem.Move(pb.MoveRequest(source="/a.txt", destination="/b.txt", create_only=True))
        assert (taken.value.code, taken.value.grpc_code) == (CONFLICT, grpc.StatusCode.ALREADY_EXISTS)
        v2 = c.filesystem.Write(pb.WriteRequest(path="/a.txt", content="alpha 2")).version
        with pytest.raises(AgentVfsError) as stale:
            c.filesystem.Move(pb.MoveRequest(source="/a.txt", destination="/c.txt", if_version=v1))
        assert (stale.value.code, stale.value.grpc_code) == (CONFLICT, grpc.StatusCode.ABORTED)
        with pytest.raises(AgentVfsError) as across:
            c.filesystem.Move(pb.MoveRequest(source="/a.txt", destination="/memories/a.txt"))
        assert (across.value.code, across.value.grpc_code) == (INVALID_PARAM, grpc.StatusCode.INVALID_ARGUMENT)
        assert "across mounts" in across.value.message

        moved = c.filesystem.Move(pb.MoveRequest(source="/a.txt", destination="/new/a.txt", if_version=v2))
        assert (moved.files_moved, moved.version > v2) == (1, True)
        read = c.filesystem.Read(pb.ReadRequest(path="/new/a.txt"))
        assert (read.content, read.version) == ("alpha 2", moved.version)
        with pytest.raises(AgentVfsError) as gone:
            c.filesystem.Stat(pb.StatRequest(path="/a.txt"))
        assert gone.value.code == NOT_FOUND

        c.filesystem.Write(pb.WriteRequest(path="/tree/one.txt", content="1"))
        c.filesystem.Write(pb.WriteRequest(path="/tree/sub/two.txt", content="2"))
        tree = c.filesystem.Move(pb.MoveRequest(source="/tree", destination="/moved/tree"))
        assert (tree.files_moved, tree.version) == (2, 0)
        assert c.filesystem.Read(pb.ReadRequest(path="/moved/tree/sub/two.txt")).content == "2"


async def test_async_client_moves(server: Server) -> None:
    """The AsyncClient's Move: awaited, with the same errors."""
    async with AsyncClient(server.address, session=session()) as c:
        await c.filesystem.Write(pb.WriteRequest(path="/d/a.txt", content="a"))
        moved = await c.filesystem.Move(pb.MoveRequest(source="/d", destination="/e"))
        assert moved.files_moved == 1
        assert (await c.filesystem.Read(pb.ReadRequest(path="/e/a.txt"))).content == "a"
        with pytest.raises(AgentVfsError) as missing:
            await c.filesystem.Move(pb.MoveRequest(source="/d", destination="/f"))
        assert missing.value.code == NOT_FOUND


def test_commit_errors_are_native_and_name_the_operation(server: Server) -> None:
    """A changeset whose second operation edits a missing file raises
    FileNotFoundError with operation_index 1 and applies nothing; an error of
    another call has no operation index."""
    with Client(server.address, session=session()) as c:
        with pytest.raises(FileNotFoundError) as caught:
            c.commit([WriteOp("/c/a.txt", "a\n"), EditOp("/c/missing.txt", "x", "y")])
        assert isinstance(caught.value, AgentVfsError) and caught.value.operation_index == 1
        with pytest.raises(AgentVfsError) as missing:
            c.filesystem.Stat(pb.StatRequest(path="/c/a.txt"))
        assert missing.value.operation_index is None
        done = c.commit([WriteOp("/c/a.txt", "a\n", create_only=True), EditOp("/c/a.txt", "a", "b", replace_all=True)])
        assert [(f.path, f.size) for f in done.files] == [("/c/a.txt", 2)]


async def test_async_commit(server: Server) -> None:
    """The asyncio client's commit applies a changeset and names a failing operation."""
    async with AsyncClient(server.address, session=session()) as c:
        done = await c.commit([WriteOp("/c/a.txt", "one two\n"), MultiEditOp("/c/a.txt", [Edit("one", "1"), Edit("two", "2")])])
        assert [(f.path, f.size) for f in done.files] == [("/c/a.txt", 4)]
        with pytest.raises(AgentVfsError) as caught:
            await c.commit([DeleteOp("/c/a.txt"), MoveOp("/c/a.txt", "/c/b.txt")])
        assert caught.value.operation_index == 1
