"""The OpenAI Agents SDK (`openai-agents`) on agentvfs: an `ApplyPatchEditor`
whose file operations land in agentvfs, and a `view_image` tool that reads
images from it.

    from agents import Agent, ApplyPatchTool
    from agentvfs import Client
    from agentvfs.openai_agents import AgentVfsEditor, view_image_tool

    client = Client("localhost:50051", session="run-1")
    agent = Agent(name="coder", tools=[ApplyPatchTool(editor=AgentVfsEditor(client)), view_image_tool(client)])

`AgentVfsEditor` implements the SDK's `agents.editor.ApplyPatchEditor`
protocol (`create_file`, `update_file`, `delete_file`, each given an
`ApplyPatchOperation`). The SDK calls the editor once per operation of a
patch call, in order, so the atomic unit here is one operation: each call
sends that operation as a one-file patch to the server's ApplyPatch tool,
which applies it as one changeset (docs/changesets.md) -- the file changes
(and, for an update with ``move_to``, moves) completely or not at all,
under one changeset id, with the editor's label. A patch call of several
operations is several changesets: the SDK gives the editor no sign of where
a call starts or ends. A failed operation answers
``ApplyPatchResult(status="failed")`` with the server's message (the model
reads it) and changes nothing; the SDK marks the whole call failed.

The diff of an operation is the SDK's V4A diff, as its own `apply_diff`
reads it: '+' lines for ``create_file``, context hunks for ``update_file``.
Paths resolve as the Tools service resolves them: relative to its project
root (or ``root``), absolute logical paths within it.
"""

from __future__ import annotations

import json
from typing import Any

from agents import FunctionTool, RunContextWrapper, ToolOutputImage
from agents.editor import ApplyPatchOperation, ApplyPatchResult

from agentvfs.client import Client
from agentvfs.v1 import tools_pb2

__all__ = ["AgentVfsEditor", "view_image_tool"]


def _invoke(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tool call through the Tools service: its envelope."""
    request = tools_pb2.InvokeRequest(name=name, arguments_json=json.dumps(arguments))
    envelope: dict[str, Any] = json.loads(client.tools.Invoke(request).envelope_json)
    return envelope


class AgentVfsEditor:
    """An `agents.editor.ApplyPatchEditor` over agentvfs: each operation is
    one changeset of the server's ApplyPatch tool (see the module doc).

    Args:
        client: the connection; its session, namespace, token and label
            apply.
        root: directory the operations' relative paths resolve against
            (the Tools service's project root when omitted).
        label: kept with every change (``x-agentvfs-label``), for History,
            Watch and ``rewind``; the client's own label when omitted.
    """

    def __init__(self, client: Client, *, root: str | None = None, label: str | None = None) -> None:
        self._client = client
        self._root = root
        self._label = label

    def create_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        """Creates ``operation.path`` from its '+' lines (an existing file is refused)."""
        return self._apply(f"*** Add File: {operation.path}\n{_lines(operation.diff)}")

    def update_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        """Applies the hunks of ``operation.diff`` to ``operation.path`` and,
        with ``move_to``, moves it there, as one changeset."""
        header = f"*** Update File: {operation.path}\n"
        if operation.move_to:
            header += f"*** Move to: {operation.move_to}\n"
        return self._apply(header + _lines(operation.diff))

    def delete_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        """Deletes ``operation.path``."""
        return self._apply(f"*** Delete File: {operation.path}\n")

    def _apply(self, section: str) -> ApplyPatchResult:
        arguments: dict[str, Any] = {"patch": f"*** Begin Patch\n{section}*** End Patch\n"}
        if self._root is not None:
            arguments["root"] = self._root
        if self._label is not None:
            arguments["label"] = self._label
        envelope = _invoke(self._client, "ApplyPatch", arguments)
        if envelope["status"] == "error":
            return ApplyPatchResult(status="failed", output=envelope["text"])
        return ApplyPatchResult(status="completed", output=envelope["text"])


def _lines(diff: str | None) -> str:
    """A diff's lines, ending in a newline."""
    text = diff or ""
    return text if text.endswith("\n") or not text else text + "\n"


def view_image_tool(client: Client, *, name: str = "view_image") -> FunctionTool:
    """A function tool like the SDK's sandbox ``view_image``: reads an image
    (PNG, JPEG, GIF, WebP; by its bytes, up to the server's 5 MiB media
    bound) through the Read tool and returns it to the model as a
    `ToolOutputImage` data URL. Anything else answers the Read tool's error
    message as text, for the model to read."""

    async def invoke(_context: RunContextWrapper[Any], arguments: str) -> ToolOutputImage | str:
        try:
            path = json.loads(arguments)["path"]
        except (ValueError, KeyError, TypeError):
            return 'Invalid arguments: expected {"path": "<image path>"}.'
        return read_image(client, str(path))

    return FunctionTool(
        name=name,
        description=(
            "Look at an image file (PNG, JPEG, GIF or WebP) of the shared file system: it is "
            "returned to you as an image. Paths are relative to the project root."
        ),
        params_json_schema={
            "type": "object",
            "properties": {"path": {"type": "string", "description": "Path of the image file."}},
            "required": ["path"],
            "additionalProperties": False,
        },
        on_invoke_tool=invoke,
    )


def read_image(client: Client, path: str) -> ToolOutputImage | str:
    """The image at ``path`` as a `ToolOutputImage` (a ``data:`` URL), or
    the reason it is not one, as text."""
    envelope = _invoke(client, "Read", {"path": path})
    data = envelope.get("data", {})
    if envelope["status"] == "error":
        return str(envelope["text"])
    if data.get("type") != "image":
        return f"'{path}' is not an image (PNG, JPEG, GIF or WebP)."
    return ToolOutputImage(image_url=f"data:{data['mime_type']};base64,{data['data']}")
