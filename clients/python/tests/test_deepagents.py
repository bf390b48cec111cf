"""agentvfs.deepagents.AgentVfsBackend against the real server and the real
deepagents package."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends.protocol import BackendProtocol
from deepagents.backends.utils import EMPTY_CONTENT_WARNING
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from agentvfs import Client
from agentvfs.deepagents import AgentVfsBackend
from agentvfs.v1 import filesystem_pb2 as pb

from .conftest import Server


@pytest.fixture
def client(server: Server) -> Iterator[Client]:
    """A client in a fresh session of its own."""
    with Client(server.address, session=f"deepagents-{uuid.uuid4().hex}") as c:
        yield c


@pytest.fixture
def backend(client: Client) -> AgentVfsBackend:
    return AgentVfsBackend(client)


def test_backend_is_a_deepagents_backend(backend: AgentVfsBackend) -> None:
    """The backend is a BackendProtocol, so create_deep_agent accepts it."""
    assert isinstance(backend, BackendProtocol)


def test_write_read_edit_ls_delete(backend: AgentVfsBackend) -> None:
    """The file operations map onto the service with deepagents' result shapes."""
    assert backend.write("/proj/a.py", "one\ntwo\nthree\n").path == "/proj/a.py"
    backend.write("/proj/sub/b.py", "x\n")
    window = backend.read("/proj/a.py", offset=1, limit=1)
    assert window.error is None and window.file_data is not None
    assert window.file_data["content"] == "two\n"
    assert (window.start_line, window.end_line, window.total_lines, window.next_offset) == (2, 2, 3, 2)
    whole = backend.read("/proj/a.py")
    assert whole.next_offset is None and whole.end_line == 3
    assert backend.read("/proj/a.py", limit=0).no_lines_requested
    edit = backend.edit("/proj/a.py", "two", "2")
    assert (edit.error, edit.occurrences) == (None, 1)
    assert backend.edit("/proj/a.py", "absent", "x").error
    ls = backend.ls("/proj")
    assert ls.entries is not None
    assert [(e["path"], e.get("is_dir")) for e in ls.entries] == [("/proj/a.py", False), ("/proj/sub/", True)]
    assert backend.delete("/proj/sub").path == "/proj/sub"
    assert "not found" in (backend.read("/proj/sub/b.py").error or "")
    assert backend.ls("/missing").error == "Path '/missing': path_not_found"
    assert backend.ls("/proj/a.py").error == "Path '/proj/a.py': not_a_directory"


def test_read_of_empty_and_binary_files(backend: AgentVfsBackend) -> None:
    """An empty file reads as deepagents' empty-file reminder; a file of a
    type deepagents reads as binary (by its extension) reads as base64."""
    backend.write("/e.txt", "")
    empty = backend.read("/e.txt")
    assert empty.file_data == {"content": EMPTY_CONTENT_WARNING, "encoding": "utf-8"}
    assert empty.start_line is None
    [up] = backend.upload_files([("/img.png", b"\x00\x01\x02")])
    assert up.error is None
    binary = backend.read("/img.png")
    assert binary.file_data == {"content": "AAEC", "encoding": "base64"}


def test_grep_is_literal_and_caps_matches(backend: AgentVfsBackend) -> None:
    """grep matches literally, filters by glob, and max_count truncates only
    when more matches exist."""
    backend.write("/g/a.py", "x = a.b\ny = axb\n")
    backend.write("/g/b.md", "a.b\n")
    result = backend.grep("a.b", "/g")
    assert result.matches == [
        {"path": "/g/a.py", "line": 1, "text": "x = a.b"},
        {"path": "/g/b.md", "line": 1, "text": "a.b"},
    ]
    assert [m["path"] for m in backend.grep("a.b", "/g", "*.py").matches or []] == ["/g/a.py"]
    capped = backend.grep("a.b", "/g", max_count=1)
    assert (len(capped.matches or []), capped.truncated) == (1, True)
    exact = backend.grep("a.b", "/g", max_count=2)
    assert (len(exact.matches or []), exact.truncated) == (2, False)


def test_glob_follows_the_protocol_semantics(backend: AgentVfsBackend) -> None:
    """A bare pattern matches names at any depth, a leading / anchors it, and
    directories are never returned."""
    for path in ["/w/top.py", "/w/src/app/main.py", "/w/src/notes.md"]:
        backend.write(path, "x")

    def paths(pattern: str) -> list[str]:
        return [m["path"] for m in backend.glob(pattern, "/w").matches or []]

    assert paths("*.py") == ["/w/src/app/main.py", "/w/top.py"]
    assert paths("/*.py") == ["/w/top.py"]
    assert paths("src/**/*.py") == ["/w/src/app/main.py"]
    assert paths("src") == []


def test_upload_and_download_files_report_per_file_errors(backend: AgentVfsBackend) -> None:
    """Batch transfers move large files and name failures with the protocol's codes."""
    big = bytes(range(256)) * 12_000  # 3 MB: several chunks each way
    responses = backend.upload_files([("/up/big.bin", big), ("/up/../../x", b"x")])
    assert [(r.path, r.error) for r in responses] == [("/up/big.bin", None), ("/up/../../x", "invalid_path")]
    down = backend.download_files(["/up/big.bin", "/up/missing", "/up"])
    assert down[0].content == big
    assert [d.error for d in down] == [None, "file_not_found", "is_directory"]


async def test_async_variants(backend: AgentVfsBackend) -> None:
    """The protocol's async variants work on this backend."""
    assert (await backend.awrite("/as/x.txt", "hello\n")).path == "/as/x.txt"
    read = await backend.aread("/as/x.txt")
    assert read.file_data is not None and read.file_data["content"] == "hello\n"
    assert (await backend.aedit("/as/x.txt", "hello", "bye")).occurrences == 1
    assert [m["text"] for m in (await backend.agrep("bye", "/as")).matches or []] == ["bye"]
    assert [m["path"] for m in (await backend.aglob("*.txt", "/as")).matches or []] == ["/as/x.txt"]
    assert [e["path"] for e in (await backend.als("/as")).entries or []] == ["/as/x.txt"]


class ScriptedModel(GenericFakeChatModel):
    """A chat model that answers with a fixed script of tool calls."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


def test_a_deep_agent_works_on_the_service(client: Client) -> None:
    """A deepagents agent given backend=AgentVfsBackend(client) writes, edits
    and reads its files on the server through its own file tools."""
    script = [
        ("write_file", {"file_path": "/plan.md", "content": "1. draft\n2. test\n"}),
        ("edit_file", {"file_path": "/plan.md", "old_string": "draft", "new_string": "write"}),
        ("read_file", {"file_path": "/plan.md"}),
    ]
    model = ScriptedModel(
        messages=iter(
            [AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": f"call_{i}"}]) for i, (n, a) in enumerate(script)]
            + [AIMessage(content="done")]
        )
    )
    agent = create_deep_agent(model=model, backend=AgentVfsBackend(client))
    out = agent.invoke({"messages": [{"role": "user", "content": "plan"}]})
    tool_output = [m.content for m in out["messages"] if m.type == "tool"]
    assert "1. write" in tool_output[-1], tool_output
    assert client.filesystem.Read(pb.ReadRequest(path="/plan.md")).content == "1. write\n2. test\n"
