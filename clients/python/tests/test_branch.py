"""The branch helpers against the real server: `with_branch`,
`create_branch`, `list_branches`, `diff_branch`'s pages, `merge_branch`'s
conflicts and resolutions, `discard_branch`, sync and asyncio."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from agentvfs import BRANCH_HEADER, DELETE, AsyncClient, Client, NotFoundError
from agentvfs.v1 import filesystem_pb2 as pb
from agentvfs.v1 import tools_pb2

from .conftest import Server


def unique(prefix: str) -> str:
    """A name no other test (or run on the shared server) takes."""
    return f"{prefix}-{uuid.uuid4().hex}"


def test_branch_changes_are_its_own_until_merged(server: Server) -> None:
    """Changes made in a branch are invisible on the base; `diff_branch`
    follows its pages; a conflicting merge answers the three versions and
    applies nothing; a merge with a resolution applies every change."""
    name = unique("try")
    with Client(server.address, session=unique("py-branch")) as c:
        c.filesystem.Write(pb.WriteRequest(path="/b/a.txt", content="one\ntwo\n"))
        c.filesystem.Write(pb.WriteRequest(path="/b/d.txt", content="d\n"))
        assert c.create_branch(name, "/b").root == "/b"
        b = c.with_branch(name)
        b.filesystem.Write(pb.WriteRequest(path="/b/a.txt", content="ONE\ntwo\n"))
        b.filesystem.Write(pb.WriteRequest(path="/b/n.txt", content="new\n"))
        b.filesystem.Delete(pb.DeleteRequest(path="/b/d.txt"))
        assert c.filesystem.Read(pb.ReadRequest(path="/b/a.txt")).content == "one\ntwo\n"
        read = c.filesystem.Read(pb.ReadRequest(path="/b/a.txt"), metadata=((BRANCH_HEADER, name),))
        assert read.content == "ONE\ntwo\n"
        diff = [(d.kind, d.path) for d in c.diff_branch(name, page_size=1)]
        assert diff == [("changed", "/b/a.txt"), ("deleted", "/b/d.txt"), ("added", "/b/n.txt")]
        assert [br.files_changed for br in c.list_branches() if br.name == name] == [3]

        c.filesystem.Write(pb.WriteRequest(path="/b/a.txt", content="uno\ntwo\n"))
        res = c.merge_branch(name)
        assert res.changeset == ""
        assert [(k.path, k.ancestor, k.branch, k.base) for k in res.conflicts] == [
            ("/b/a.txt", b"one\ntwo\n", b"ONE\ntwo\n", b"uno\ntwo\n")
        ]
        assert c.filesystem.Read(pb.ReadRequest(path="/b/d.txt")).content == "d\n"

        res = c.merge_branch(name, resolutions={"/b/a.txt": "merged\n"}, discard=True)
        assert res.changeset and res.discarded and not res.conflicts
        assert [f.path for f in res.files] == ["/b/a.txt", "/b/d.txt", "/b/n.txt"]
        assert c.filesystem.Read(pb.ReadRequest(path="/b/a.txt")).content == "merged\n"
        assert c.filesystem.Read(pb.ReadRequest(path="/b/n.txt")).content == "new\n"
        with pytest.raises(NotFoundError):
            c.filesystem.Read(pb.ReadRequest(path="/b/d.txt"))
        with pytest.raises(NotFoundError):
            c.discard_branch(name)
        with pytest.raises(TypeError, match="/b/a.txt"):
            c.merge_branch(name, resolutions={"/b/a.txt": 7})  # type: ignore[dict-item]


async def test_async_branch_resolve_delete_and_discard(server: Server) -> None:
    """The AsyncClient: `branch=`, a conflict settled by DELETE, a paged
    diff, and a discarded branch that leaves the base as it was."""
    session, one, two = unique("py-branch"), unique("one"), unique("two")
    async with AsyncClient(server.address, session=session) as c:
        await c.filesystem.Write(pb.WriteRequest(path="/r/a.txt", content="a\n"))
        await c.create_branch(one, "/r")
        async with AsyncClient(server.address, session=session, branch=one) as b:
            await b.filesystem.Write(pb.WriteRequest(path="/r/a.txt", content="branch\n"))
            await b.filesystem.Write(pb.WriteRequest(path="/r/z.txt", content="z\n"))
        assert [d.path async for d in c.diff_branch(one, page_size=1)] == ["/r/a.txt", "/r/z.txt"]
        await c.filesystem.Write(pb.WriteRequest(path="/r/a.txt", content="base\n"))
        assert [k.path for k in (await c.merge_branch(one)).conflicts] == ["/r/a.txt"]
        res = await c.merge_branch(one, resolutions={"/r/a.txt": DELETE})
        assert res.changeset and not res.conflicts
        with pytest.raises(NotFoundError):
            await c.filesystem.Read(pb.ReadRequest(path="/r/a.txt"))
        await c.create_branch(two, "/r")
        await c.with_branch(two).filesystem.Write(pb.WriteRequest(path="/r/b.txt", content="b\n"))
        await c.discard_branch(two)
        assert two not in [br.name for br in await c.list_branches()]
        with pytest.raises(NotFoundError):
            await c.filesystem.Read(pb.ReadRequest(path="/r/b.txt"))
        with pytest.raises(NotFoundError):
            await c.with_branch(two).filesystem.Read(pb.ReadRequest(path="/r/b.txt"))


def test_a_branch_version_round_trips_exactly_through_the_envelope_and_the_rpcs(server: Server) -> None:
    """A branch's version has bit 63 set, past 2^53: the tools' envelope
    shows it as a string of digits, the Edit tool takes it back as shown,
    and the RPCs give and take it as the same int."""
    name = unique("v")
    with Client(server.address, session=unique("py-branch")) as c:
        c.filesystem.Write(pb.WriteRequest(path="/v/a.txt", content="one\n"))
        c.create_branch(name, "/v")
        b = c.with_branch(name)
        written = b.filesystem.Write(pb.WriteRequest(path="/v/a.txt", content="two\n"))
        assert written.version > 2**53, written.version

        def invoke(tool: str, arguments: dict[str, object]) -> dict[str, Any]:
            request = tools_pb2.InvokeRequest(name=tool, arguments_json=json.dumps(arguments))
            envelope: dict[str, Any] = json.loads(b.tools.Invoke(request).envelope_json)
            return envelope

        read = invoke("Read", {"path": "v/a.txt"})
        assert isinstance(read["stats"]["version"], str), read
        assert int(read["stats"]["version"]) == written.version
        edit = {"path": "v/a.txt", "old_string": "two", "new_string": "three"}
        edited = invoke("Edit", {**edit, "expected_version": read["stats"]["version"]})
        assert edited["status"] == "success", edited
        now = b.filesystem.Read(pb.ReadRequest(path="/v/a.txt"))
        assert now.content == "three\n"
        assert int(edited["stats"]["version"]) == now.version
        again = b.filesystem.Write(pb.WriteRequest(path="/v/a.txt", content="four\n", if_version=now.version))
        assert again.version > now.version
