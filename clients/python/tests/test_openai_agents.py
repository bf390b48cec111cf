"""agentvfs.openai_agents against the real server and the real OpenAI
Agents SDK: the editor takes the SDK's own `ApplyPatchOperation`s and
leaves exactly what the SDK's own `apply_diff` computes; each operation is
one changeset; the Copy RPC; the view_image tool's image output."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator

import pytest
from agents import ApplyPatchTool, FunctionTool, RunContextWrapper, ToolOutputImage, apply_diff
from agents.editor import ApplyPatchEditor, ApplyPatchOperation, ApplyPatchResult

from agentvfs import AlreadyExistsError, Client
from agentvfs.openai_agents import AgentVfsEditor, view_image_tool
from agentvfs.v1 import filesystem_pb2 as pb

from .conftest import Server

# A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4//8/AAX+Av6nNYGEAAAAAElFTkSuQmCC"
)


@pytest.fixture
def client(server: Server) -> Iterator[Client]:
    """A client in a fresh session of its own."""
    with Client(server.address, session=f"agents-{uuid.uuid4().hex}") as c:
        yield c


def read(client: Client, path: str) -> str:
    return str(client.filesystem.Read(pb.ReadRequest(path=path)).content)


def test_the_editor_is_the_sdks_apply_patch_editor(client: Client) -> None:
    """The SDK's runtime-checkable protocol accepts it, and ApplyPatchTool takes it."""
    editor = AgentVfsEditor(client)
    assert isinstance(editor, ApplyPatchEditor)
    assert ApplyPatchTool(editor=editor).editor is editor


def test_operations_leave_what_the_sdks_apply_diff_computes(client: Client) -> None:
    """Create, update (with context hunks), move and delete through the
    SDK's own operation type. Each update leaves exactly what the SDK's own
    `apply_diff` makes of the file as the server held it; a created file is
    the SDK's too, plus the final newline that apply_patch (Codex's and
    agentvfs's) gives every added file, which `apply_diff(mode="create")`
    leaves off (the deliberate difference the client README lists)."""
    editor = AgentVfsEditor(client, label="turn-1")
    create = "+def greet():\n+    return 'hi'\n+\n+print(greet())\n"
    result = editor.create_file(ApplyPatchOperation(type="create_file", path="/proj/app.py", diff=create))
    assert result.status == "completed", result.output
    assert read(client, "/proj/app.py") == apply_diff("", create, mode="create") + "\n"

    update = "@@ def greet():\n-    return 'hi'\n+    return 'hello'\n"
    before = read(client, "/proj/app.py")
    result = editor.update_file(ApplyPatchOperation(type="update_file", path="/proj/app.py", diff=update))
    assert result.status == "completed", result.output
    assert read(client, "/proj/app.py") == apply_diff(before, update)

    move = "@@\n-print(greet())\n+print(greet().upper())\n"
    before = read(client, "/proj/app.py")
    op = ApplyPatchOperation(type="update_file", path="/proj/app.py", diff=move, move_to="/proj/main.py")
    result = editor.update_file(op)
    assert result.status == "completed", result.output
    assert read(client, "/proj/main.py") == apply_diff(before, move)
    with pytest.raises(FileNotFoundError):
        read(client, "/proj/app.py")

    result = editor.delete_file(ApplyPatchOperation(type="delete_file", path="/proj/main.py"))
    assert result.status == "completed", result.output
    with pytest.raises(FileNotFoundError):
        read(client, "/proj/main.py")


@pytest.mark.parametrize(
    ("before", "diff"),
    [
        ("alpha   \nbeta\ngamma\t\n", "@@\n alpha\n-beta\n+BETA\n gamma\n"),
        ("    alpha\nbeta\n\tgamma  \n", "@@\n alpha\n-beta\n+BETA\n gamma\n"),
    ],
    ids=["trailing-whitespace", "surrounding-whitespace"],
)
def test_leniently_matched_context_keeps_the_files_text(client: Client, before: str, diff: str) -> None:
    """Context lines that match the file only ignoring whitespace keep the
    file's own text, as the SDK's `apply_diff` keeps it: only `-` lines go
    and `+` lines come. (The SDK does not read typographic punctuation as
    ASCII, so that leniency is compared with Codex only, in
    tests/it/apply_patch.rs.)"""
    path = f"/lenient/{uuid.uuid4().hex}.txt"
    client.filesystem.Write(pb.WriteRequest(path=path, content=before))
    result = AgentVfsEditor(client).update_file(ApplyPatchOperation(type="update_file", path=path, diff=diff))
    assert result.status == "completed", result.output
    assert read(client, path) == apply_diff(before, diff)


def test_each_operation_is_one_changeset_with_the_label(client: Client) -> None:
    """An update that moves is one changeset: the tombstone at the source
    and the new file at the destination carry the same changeset id and the
    editor's label."""
    client.filesystem.Write(pb.WriteRequest(path="/cs/a.txt", content="one\ntwo\n"))
    editor = AgentVfsEditor(client, label="turn-2")
    op = ApplyPatchOperation(type="update_file", path="/cs/a.txt", diff="@@\n one\n-two\n+three\n", move_to="/cs/b.txt")
    assert editor.update_file(op).status == "completed"
    moved = client.filesystem.ListVersions(pb.ListVersionsRequest(path="/cs/b.txt")).versions[0]
    gone = client.filesystem.ListVersions(pb.ListVersionsRequest(path="/cs/a.txt")).versions[0]
    assert moved.label == gone.label == "turn-2"
    assert moved.changeset and moved.changeset == gone.changeset
    assert gone.deleted and read(client, "/cs/b.txt") == "one\nthree\n"


def test_a_failed_operation_changes_nothing_and_tells_the_model(client: Client) -> None:
    """A hunk that does not match, or a delete of a missing file, answers
    status failed with the server's message; nothing changes."""
    client.filesystem.Write(pb.WriteRequest(path="/f/a.txt", content="alpha\n"))
    editor = AgentVfsEditor(client)
    bad = editor.update_file(ApplyPatchOperation(type="update_file", path="/f/a.txt", diff="@@\n-beta\n+gamma\n"))
    assert isinstance(bad, ApplyPatchResult) and bad.status == "failed"
    assert bad.output and "a.txt" in bad.output
    missing = editor.delete_file(ApplyPatchOperation(type="delete_file", path="/f/missing.txt"))
    assert missing.status == "failed" and missing.output and "missing.txt" in missing.output
    assert read(client, "/f/a.txt") == "alpha\n"


def test_copy_rpc(client: Client) -> None:
    """Filesystem.Copy through the typed stub: the copy, then create_only."""
    client.filesystem.Write(pb.WriteRequest(path="/cp/a.txt", content="alpha\n"))
    out = client.filesystem.Copy(pb.CopyRequest(source="/cp/a.txt", destination="/cp/b/a.txt"))
    assert (out.bytes_written, out.created) == (6, True)
    assert read(client, "/cp/b/a.txt") == "alpha\n"
    with pytest.raises(AlreadyExistsError):
        client.filesystem.Copy(pb.CopyRequest(source="/cp/a.txt", destination="/cp/b/a.txt", create_only=True))


async def test_view_image_returns_the_image_to_the_model(client: Client) -> None:
    """view_image is a FunctionTool; on a PNG it answers a ToolOutputImage
    whose data URL holds the bytes, on a text file the reason as text."""
    client.upload("/img/dot.png", PNG)
    client.filesystem.Write(pb.WriteRequest(path="/img/notes.txt", content="words\n"))
    tool = view_image_tool(client)
    assert isinstance(tool, FunctionTool) and tool.name == "view_image"
    context = RunContextWrapper(context=None)

    async def call(path: str) -> object:
        return await tool.on_invoke_tool(context, json.dumps({"path": path}))  # type: ignore[arg-type]

    image = await call("/img/dot.png")
    assert isinstance(image, ToolOutputImage)
    assert image.image_url == "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert await call("/img/notes.txt") == "'/img/notes.txt' is not an image (PNG, JPEG, GIF or WebP)."
    assert "does not exist" in str(await call("/img/missing.png"))
