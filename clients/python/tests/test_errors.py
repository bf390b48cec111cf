"""Errors: the codes are the contract's reasons, and each raises Python's own error where one fits."""

from __future__ import annotations

import uuid

import pytest

import agentvfs
from agentvfs import AgentVfsError, AsyncClient, Client, ConflictError
from agentvfs.v1 import errors_pb2
from agentvfs.v1 import filesystem_pb2 as pb

from .conftest import Server


def test_codes_are_the_error_reasons() -> None:
    """Every ErrorReason but UNSPECIFIED, without its prefix, is a code the package exports."""
    reasons = [name.removeprefix("ERROR_REASON_") for name in errors_pb2.ErrorReason.keys()[1:]]
    assert reasons == [
        agentvfs.INVALID_PARAM,
        agentvfs.NOT_FOUND,
        agentvfs.ACCESS_DENIED,
        agentvfs.CONFLICT,
        agentvfs.IS_DIRECTORY,
        agentvfs.BINARY_FILE,
        agentvfs.TIMEOUT,
        agentvfs.INTERNAL_ERROR,
    ]


def test_errors_are_pythons_own(server: Server) -> None:
    """The sync client raises FileNotFoundError, FileExistsError, IsADirectoryError,
    NotADirectoryError and a ConflictError with the versions, each an AgentVfsError."""
    with Client(server.address, session=f"errors-{uuid.uuid4().hex}") as c:
        v1 = c.filesystem.Write(pb.WriteRequest(path="/f.txt", content="1")).version
        v2 = c.filesystem.Write(pb.WriteRequest(path="/f.txt", content="2")).version
        with pytest.raises(FileNotFoundError) as missing:
            c.filesystem.Read(pb.ReadRequest(path="/missing"))
        assert isinstance(missing.value, AgentVfsError)
        assert missing.value.reason == errors_pb2.ERROR_REASON_NOT_FOUND
        with pytest.raises(FileExistsError):
            c.filesystem.Write(pb.WriteRequest(path="/f.txt", content="x", create_only=True))
        with pytest.raises(ConflictError) as stale:
            c.filesystem.Write(pb.WriteRequest(path="/f.txt", content="x", if_version=v1))
        assert (stale.value.path, stale.value.expected_version, stale.value.actual_version) == ("/f.txt", v1, v2)
        with pytest.raises(IsADirectoryError):
            c.filesystem.Read(pb.ReadRequest(path="/"))
        with pytest.raises(NotADirectoryError):
            c.filesystem.ListInfo(pb.ListInfoRequest(path="/f.txt"))
        with pytest.raises(AgentVfsError) as bad:
            c.filesystem.Read(pb.ReadRequest(path="/f.txt", offset=9))
        assert type(bad.value) is AgentVfsError and not isinstance(bad.value, OSError)


async def test_async_errors_are_pythons_own(server: Server) -> None:
    """The AsyncClient raises the same classes, from unary calls and streams."""
    async with AsyncClient(server.address, session=f"errors-{uuid.uuid4().hex}") as c:
        with pytest.raises(FileNotFoundError):
            await c.filesystem.Stat(pb.StatRequest(path="/missing"))
        with pytest.raises(FileNotFoundError):
            [e async for e in c.glob(pattern="*", path="/missing")]
