"""Claude's memory and text-editor tools on agentvfs.

The memory tool is differential: every script runs against the SDK's own
`BetaLocalFilesystemMemoryTool` over a temporary directory and against
`AgentVfsMemoryTool` on the real server, and the answers (texts and error
messages) must be equal. The one masked column is a directory's size in a
directory view (a local file system reports its block size, 4K on ext4;
agentvfs has no directory blocks): the README lists it with the other
deliberate differences, which these scripts avoid.
"""

from __future__ import annotations

import json
import re
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from anthropic.lib.tools import BetaBuiltinFunctionTool, ToolError
from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool

from agentvfs import AsyncClient, Client
from agentvfs.claude import (
    AgentVfsAsyncMemoryTool,
    AgentVfsAsyncTextEditorTool,
    AgentVfsMemoryTool,
    AgentVfsTextEditorTool,
)
from agentvfs.v1 import filesystem_pb2 as pb

from .conftest import Server

Command = dict[str, Any]

# Each script starts from an empty /memories.
SCRIPTS: dict[str, list[Command]] = {
    "create_view_and_refuse_overwrite": [
        {"command": "view", "path": "/memories"},
        {"command": "create", "path": "/memories/notes.md", "file_text": "# Notes\n- likes coffee\n- lives in Oslo\n"},
        {"command": "create", "path": "/memories/notes.md", "file_text": "again"},
        {"command": "create", "path": "/memories/projects/agentvfs/todo.txt", "file_text": "ship it"},
        {"command": "create", "path": "/memories/projects/readme", "file_text": ""},
        {"command": "create", "path": "/memories/.hidden", "file_text": "secret"},
        {"command": "view", "path": "/memories"},
        {"command": "view", "path": "/memories/projects"},
        {"command": "view", "path": "/memories/notes.md"},
        {"command": "view", "path": "/memories/projects/agentvfs/todo.txt"},
        {"command": "view", "path": "/memories/projects/readme"},
        {"command": "view", "path": "/memories/missing.md"},
        {"command": "view", "path": "/memories/projects/../notes.md"},
        {"command": "create", "path": "/memories/ünï cödé.md", "file_text": "ß\n"},
        {"command": "view", "path": "/memories/ünï cödé.md"},
    ],
    "view_ranges": [
        {"command": "create", "path": "/memories/l.txt", "file_text": "one\ntwo\nthree\nfour\nfive\n"},
        {"command": "view", "path": "/memories/l.txt", "view_range": [2, 3]},
        {"command": "view", "path": "/memories/l.txt", "view_range": [3, -1]},
        {"command": "view", "path": "/memories/l.txt", "view_range": [0, 2]},
        {"command": "view", "path": "/memories/l.txt", "view_range": [4, 2]},
        {"command": "view", "path": "/memories/l.txt", "view_range": [5, 99]},
        {"command": "view", "path": "/memories/l.txt", "view_range": [9, 12]},
        {"command": "view", "path": "/memories/l.txt", "view_range": [1, -3]},
        {"command": "view", "path": "/memories/l.txt", "view_range": [2]},
    ],
    "str_replace": [
        {"command": "create", "path": "/memories/p.md", "file_text": "a\nb\nc\nd\ne\nf\ng\nb\n"},
        {"command": "str_replace", "path": "/memories/p.md", "old_str": "e", "new_str": "E1\nE2"},
        {"command": "str_replace", "path": "/memories/p.md", "old_str": "b", "new_str": "B"},
        {"command": "str_replace", "path": "/memories/p.md", "old_str": "zzz", "new_str": "y"},
        {"command": "str_replace", "path": "/memories/p.md", "old_str": "a\nb", "new_str": ""},
        {"command": "view", "path": "/memories/p.md"},
        {"command": "create", "path": "/memories/o.txt", "file_text": "aaaa"},
        {"command": "str_replace", "path": "/memories/o.txt", "old_str": "aa", "new_str": "b"},
        {"command": "str_replace", "path": "/memories/o.txt", "old_str": "aaa", "new_str": "b"},
        {"command": "view", "path": "/memories/o.txt"},
        {"command": "str_replace", "path": "/memories/none.txt", "old_str": "x", "new_str": "y"},
        {"command": "create", "path": "/memories/d/f.txt", "file_text": "x"},
        {"command": "str_replace", "path": "/memories/d", "old_str": "x", "new_str": "y"},
    ],
    "insert": [
        {"command": "create", "path": "/memories/i.txt", "file_text": "one\ntwo"},
        {"command": "insert", "path": "/memories/i.txt", "insert_line": 0, "insert_text": "zero\n"},
        {"command": "insert", "path": "/memories/i.txt", "insert_line": 3, "insert_text": "three\nfour\n\n"},
        {"command": "insert", "path": "/memories/i.txt", "insert_line": 2, "insert_text": "one and a half"},
        {"command": "insert", "path": "/memories/i.txt", "insert_line": 7, "insert_text": "x"},
        {"command": "insert", "path": "/memories/i.txt", "insert_line": -1, "insert_text": "x"},
        {"command": "view", "path": "/memories/i.txt"},
        {"command": "create", "path": "/memories/empty.txt", "file_text": ""},
        {"command": "insert", "path": "/memories/empty.txt", "insert_line": 0, "insert_text": "first"},
        {"command": "view", "path": "/memories/empty.txt"},
        {"command": "create", "path": "/memories/crlf.txt", "file_text": "a\r\nb\r\n"},
        {"command": "insert", "path": "/memories/crlf.txt", "insert_line": 1, "insert_text": "x"},
        {"command": "view", "path": "/memories/crlf.txt"},
        {"command": "insert", "path": "/memories/none.txt", "insert_line": 0, "insert_text": "x"},
        {"command": "insert", "path": "/memories", "insert_line": 0, "insert_text": "x"},
    ],
    "delete_and_rename": [
        {"command": "create", "path": "/memories/a.txt", "file_text": "A"},
        {"command": "create", "path": "/memories/dir/b.txt", "file_text": "B"},
        {"command": "create", "path": "/memories/dir/sub/c.txt", "file_text": "C"},
        {"command": "rename", "old_path": "/memories/a.txt", "new_path": "/memories/dir/b.txt"},
        {"command": "rename", "old_path": "/memories/gone.txt", "new_path": "/memories/new.txt"},
        {"command": "rename", "old_path": "/memories", "new_path": "/memories/x"},
        {"command": "rename", "old_path": "/memories/a.txt", "new_path": "/memories/archive/2025/a.txt"},
        {"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/folder"},
        {"command": "view", "path": "/memories"},
        {"command": "delete", "path": "/memories/archive"},
        {"command": "delete", "path": "/memories/folder"},
        {"command": "delete", "path": "/memories/folder"},
        {"command": "delete", "path": "/memories"},
        {"command": "delete", "path": "/memories/"},
        {"command": "view", "path": "/memories"},
    ],
    "paths_outside_memories": [
        {"command": "view", "path": "/etc/passwd"},
        {"command": "view", "path": "memories/x"},
        {"command": "create", "path": "/memories/../escape.txt", "file_text": "x"},
        {"command": "view", "path": "/memories/a/../../etc"},
        {"command": "create", "path": "/memories/./a/./b.txt", "file_text": "ok"},
        {"command": "view", "path": "/memories/a/b.txt"},
        {"command": "delete", "path": "/tmp/x"},
        {"command": "rename", "old_path": "/memories/a/b.txt", "new_path": "/elsewhere/b.txt"},
    ],
}

_SIZE = re.compile(r"^[0-9.]+[BKMG]\t")


def _mask_directory_sizes(text: str) -> str:
    """A directory view with the size of every directory line replaced."""
    if not text.startswith("Here're the files and directories"):
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if i == 1 or line.endswith("/"):
            lines[i] = _SIZE.sub("DIR\t", line)
    return "\n".join(lines)


def _outcome(tool: BetaBuiltinFunctionTool, command: Command) -> tuple[str, str]:
    """("ok", text) or ("error", message), as the tool runner tells Claude."""
    try:
        return "ok", _mask_directory_sizes(str(tool.call(command)))
    except ToolError as e:
        return "error", str(e.content)


@pytest.fixture
def vfs(server: Server) -> Iterator[Client]:
    """A client in a namespace of its own: an empty /memories (Store tier)."""
    with Client(server.address, session=f"claude-{uuid.uuid4().hex}", namespace=f"claude-{uuid.uuid4().hex}") as c:
        yield c


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_memory_tool_answers_as_the_sdk_does(vfs: Client, script: str) -> None:
    """Every command of the script: the same answer from the SDK's local tool and from agentvfs."""
    ours = AgentVfsMemoryTool(vfs)
    with tempfile.TemporaryDirectory() as base:
        reference = BetaLocalFilesystemMemoryTool(base_path=base)
        for i, command in enumerate(SCRIPTS[script]):
            expected = _outcome(reference, command)
            assert _outcome(ours, command) == expected, f"{script}[{i}]: {command}"
        assert ours.clear_all_memory() == reference.clear_all_memory()
        view: Command = {"command": "view", "path": "/memories"}
        assert _outcome(ours, view) == _outcome(reference, view), f"{script}: after clear_all_memory"


def test_memory_files_are_agentvfs_files(vfs: Client) -> None:
    """What the memory tool writes is the logical file /memories/... on the Store mount."""
    tool = AgentVfsMemoryTool(vfs)
    assert tool.to_dict() == {"type": "memory_20250818", "name": "memory"}
    tool.call({"command": "create", "path": "/memories/user.md", "file_text": "likes tea\n"})
    read = vfs.filesystem.Read(pb.ReadRequest(path="/memories/user.md"))
    assert "likes tea" in read.content
    vfs.filesystem.Write(pb.WriteRequest(path="/memories/user.md", content="likes coffee\n"))
    assert tool.call({"command": "view", "path": "/memories/user.md"}) == (
        "Here's the content of /memories/user.md with line numbers:\n     1\tlikes coffee\n     2\t"
    )


async def test_async_memory_tool(server: Server) -> None:
    """The asyncio adapter answers as the sync one."""
    async with AsyncClient(server.address, session="claude-async", namespace=f"claude-{uuid.uuid4().hex}") as c:
        tool = AgentVfsAsyncMemoryTool(c)
        assert await tool.call({"command": "create", "path": "/memories/a.md", "file_text": "x"}) == (
            "File created successfully at: /memories/a.md"
        )
        with pytest.raises(ToolError, match="already exists"):
            await tool.call({"command": "create", "path": "/memories/a.md", "file_text": "x"})
        editor = AgentVfsAsyncTextEditorTool(c)
        assert "     1\tx" in await editor.call({"command": "view", "path": "/memories/a.md"})
        assert await tool.clear_all_memory() == "All memory cleared"
        assert str(await tool.call({"command": "view", "path": "/memories"})).endswith("\n0B\t/memories")


def _editor(vfs: Client, **kwargs: Any) -> AgentVfsTextEditorTool:
    return AgentVfsTextEditorTool(vfs, **kwargs)


def _error(tool: BetaBuiltinFunctionTool, command: Command) -> str:
    with pytest.raises(ToolError) as caught:
        tool.call(command)
    return str(caught.value.content)


def test_text_editor_views_creates_and_edits(vfs: Client) -> None:
    """The texts of Anthropic's reference editor (anthropic-quickstarts computer-use demo)."""
    editor = _editor(vfs)
    assert editor.to_dict() == {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"}
    path = "/ed/app.py"
    assert editor.call({"command": "create", "path": path, "file_text": "def f():\n\treturn 1\n"}) == (
        f"File created successfully at: {path}"
    )
    assert _error(editor, {"command": "create", "path": path, "file_text": "x"}) == (
        f"File already exists at: {path}. Cannot overwrite files using command `create`."
    )
    assert editor.call({"command": "view", "path": path}) == (
        f"Here's the result of running `cat -n` on {path}:\n     1\tdef f():\n     2\t\treturn 1\n     3\t\n"
    )
    assert editor.call({"command": "view", "path": path, "view_range": [2, -1]}) == (
        f"Here's the result of running `cat -n` on {path}:\n     2\t\treturn 1\n     3\t\n"
    )
    assert editor.call({"command": "str_replace", "path": path, "old_str": "return 1", "new_str": "return 2"}) == (
        f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet of {path}:\n"
        "     1\tdef f():\n     2\t\treturn 2\n     3\t\n"
        "Review the changes and make sure they are as expected. Edit the file again if necessary."
    )
    assert editor.call({"command": "insert", "path": path, "insert_line": 1, "insert_text": '\t"""Doc."""'}) == (
        f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet of the edited file:\n"
        '     1\tdef f():\n     2\t\t"""Doc."""\n     3\t\treturn 2\n'
        "Review the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). "
        "Edit the file again if necessary."
    )
    # Earlier versions' new_str is accepted for insert.
    editor.call({"command": "insert", "path": path, "insert_line": 0, "new_str": "# app"})
    assert vfs.filesystem.Read(pb.ReadRequest(path=path)).content == '# app\ndef f():\n\t"""Doc."""\n\treturn 2\n'
    assert editor.call({"command": "view", "path": "/ed"}) == (
        "Here's the files and directories up to 2 levels deep in /ed, excluding hidden items:\n/ed\n/ed/app.py\n"
    )


def test_text_editor_refusals(vfs: Client) -> None:
    """Bad paths, ranges and strings are is_error results in the reference editor's words."""
    editor = _editor(vfs)
    editor.call({"command": "create", "path": "/ed2/t.txt", "file_text": "x\ny\nx\n"})
    cases: list[tuple[Command, str]] = [
        ({"command": "view", "path": "ed2/t.txt"}, "The path ed2/t.txt is not an absolute path, it should start with `/`. Maybe you meant /ed2/t.txt?"),
        ({"command": "view", "path": "/ed2/none"}, "The path /ed2/none does not exist. Please provide a valid path."),
        ({"command": "str_replace", "path": "/ed2", "old_str": "x"}, "The path /ed2 is a directory and only the `view` command can be used on directories"),
        ({"command": "view", "path": "/ed2", "view_range": [1, 2]}, "The `view_range` parameter is not allowed when `path` points to a directory."),
        ({"command": "view", "path": "/ed2/t.txt", "view_range": [0, 2]}, "Invalid `view_range`: [0, 2]. Its first element `0` should be within the range of lines of the file: [1, 4]"),
        ({"command": "str_replace", "path": "/ed2/t.txt", "old_str": "x", "new_str": "z"}, "No replacement was performed. Multiple occurrences of old_str `x` in lines [1, 3]. Please ensure it is unique"),
        ({"command": "str_replace", "path": "/ed2/t.txt", "old_str": "q", "new_str": "z"}, "No replacement was performed, old_str `q` did not appear verbatim in /ed2/t.txt."),
        ({"command": "insert", "path": "/ed2/t.txt", "insert_line": 4, "insert_text": "z"}, "Invalid `insert_line` parameter: 4. It should be within the range of lines of the file: [0, 3]"),
        ({"command": "insert", "path": "/ed2/t.txt", "insert_text": "z"}, "Parameter `insert_line` is required for command: insert"),
        ({"command": "create", "path": "/ed2/n.txt"}, "Parameter `file_text` is required for command: create"),
        ({"command": "undo_edit", "path": "/ed2/t.txt"}, "Unrecognized command undo_edit. The allowed commands for the str_replace_based_edit_tool tool are: view, create, str_replace, insert"),
    ]
    for command, message in cases:
        assert _error(editor, command) == message, command


def test_text_editor_max_characters_cuts_views(vfs: Client) -> None:
    """The tool's max_characters goes to Claude with the tool and cuts every view."""
    editor = _editor(vfs, max_characters=7)
    assert editor.to_dict()["max_characters"] == 7
    editor.call({"command": "create", "path": "/ed3/long.txt", "file_text": "abc\ndefgh\nij\n"})
    assert editor.call({"command": "view", "path": "/ed3/long.txt"}) == (
        "Here's the result of running `cat -n` on /ed3/long.txt:\n     1\tabc\n     2\tdef\n"
        "<response clipped><NOTE>To save on context only part of this file has been shown to you. "
        "View the rest with view_range.</NOTE>"
    )


def _reply(n: int, *content: dict[str, Any], stop: str = "tool_use") -> dict[str, Any]:
    """A Messages API response as the API sends it."""
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5-5",
        "content": list(content),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


def _use(id: str, name: str, input: Command) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def test_a_scripted_claude_session_runs_on_agentvfs(vfs: Client) -> None:
    """The SDK's tool runner, fed recorded replies instead of the network, runs
    Claude's tool calls on the real server and sends back what it answered."""
    import anthropic
    import httpx2 as httpx

    editor = "str_replace_based_edit_tool"
    replies = [
        _reply(
            1,
            _use("toolu_1", "memory", {"command": "view", "path": "/memories"}),
            _use("toolu_2", "memory", {"command": "create", "path": "/memories/user.md", "file_text": "- likes tea\n"}),
        ),
        _reply(
            2,
            {"type": "text", "text": "Now the script."},
            _use("toolu_3", editor, {"command": "create", "path": "/ws/hi.py", "file_text": "print('hi')\n"}),
            _use("toolu_4", editor, {"command": "str_replace", "path": "/ws/hi.py", "old_str": "bye", "new_str": "x"}),
        ),
        _reply(3, {"type": "text", "text": "Done."}, stop="end_turn"),
    ]
    sent: list[dict[str, Any]] = []

    def api(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=replies[len(sent) - 1])

    claude = anthropic.Anthropic(api_key="test-key", http_client=httpx.Client(transport=httpx.MockTransport(api)))
    runner = claude.beta.messages.tool_runner(
        model="claude-sonnet-5-5",
        max_tokens=1024,
        messages=[{"role": "user", "content": "Remember that I like tea, then write hi.py."}],
        tools=[AgentVfsMemoryTool(vfs), AgentVfsTextEditorTool(vfs)],
    )
    final = runner.until_done()
    assert [block.type for block in final.content] == ["text"]
    assert len(sent) == 3
    assert sent[0]["tools"] == [
        {"type": "memory_20250818", "name": "memory"},
        {"type": "text_editor_20250728", "name": editor},
    ]

    def results(request: dict[str, Any]) -> list[tuple[str, bool, str]]:
        blocks = request["messages"][-1]["content"]
        return [(b["tool_use_id"], bool(b.get("is_error")), _text(b["content"])) for b in blocks]

    assert results(sent[1]) == [
        ("toolu_1", False, "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items:\n0B\t/memories"),
        ("toolu_2", False, "File created successfully at: /memories/user.md"),
    ]
    assert results(sent[2]) == [
        ("toolu_3", False, "File created successfully at: /ws/hi.py"),
        ("toolu_4", True, "No replacement was performed, old_str `bye` did not appear verbatim in /ws/hi.py."),
    ]
    assert vfs.filesystem.Read(pb.ReadRequest(path="/memories/user.md")).content == "- likes tea\n"
    assert vfs.filesystem.Read(pb.ReadRequest(path="/ws/hi.py")).content == "print('hi')\n"


def _text(content: str | list[dict[str, Any]]) -> str:
    """A tool_result's content as text (a string, or text blocks)."""
    if isinstance(content, str):
        return content
    return "".join(str(block["text"]) for block in content)
