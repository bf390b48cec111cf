"""Claude's own file tools on agentvfs, for Anthropic's Python SDK.

    from anthropic import Anthropic
    from agentvfs import Client
    from agentvfs.claude import AgentVfsMemoryTool, AgentVfsTextEditorTool

    vfs = Client("localhost:50051", session="run-1")
    runner = Anthropic().beta.messages.tool_runner(
        model="claude-sonnet-5-5", max_tokens=1024, messages=[...],
        tools=[AgentVfsMemoryTool(vfs), AgentVfsTextEditorTool(vfs)],
    )

- `AgentVfsMemoryTool` subclasses the SDK's `BetaAbstractMemoryTool`
  (`memory_20250818`), so the SDK's tool runner stores Claude's memories in
  agentvfs under ``/memories`` instead of a local directory.
- `AgentVfsTextEditorTool` is Claude's text editor (`text_editor_20250728`,
  ``str_replace_based_edit_tool``), which the SDK defines but does not run.
- `AgentVfsAsyncMemoryTool` and `AgentVfsAsyncTextEditorTool` are the same
  on `agentvfs.AsyncClient`, for the SDK's async runner.

Both are thin adapters: each command is one ``Tools.Invoke`` of the
server's ``memory`` or ``str_replace_based_edit_tool`` tool (src/tools/ in
the server), which answers with the texts of Anthropic's reference
implementations. A success is the envelope's text; an error envelope is the
SDK's `ToolError` with its message, which the runner hands Claude as an
``is_error`` result. The deliberate differences from the SDK's
`BetaLocalFilesystemMemoryTool` are listed in the client README.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Final, Generic, TypeVar

from anthropic.lib.tools import (
    BetaAbstractMemoryTool,
    BetaAsyncAbstractMemoryTool,
    BetaAsyncBuiltinFunctionTool,
    BetaBuiltinFunctionTool,
    ToolError,
)
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
    BetaToolTextEditor20250728Param,
)

from agentvfs.aio import AsyncClient
from agentvfs.client import Client
from agentvfs.errors import NotFoundError
from agentvfs.v1 import filesystem_pb2, tools_pb2

__all__ = [
    "MEMORIES",
    "MEMORY_TOOL",
    "TEXT_EDITOR_TOOL",
    "AgentVfsAsyncMemoryTool",
    "AgentVfsAsyncTextEditorTool",
    "AgentVfsMemoryTool",
    "AgentVfsTextEditorTool",
]

#: The server's tool behind `AgentVfsMemoryTool`.
MEMORY_TOOL: Final = "memory"
#: The memory directory, a logical path (the Store mount of the default configuration).
MEMORIES: Final = "/memories"
#: The server's tool behind `AgentVfsTextEditorTool` (Claude's name for it).
TEXT_EDITOR_TOOL: Final = "str_replace_based_edit_tool"

_MemoryCommand = (
    BetaMemoryTool20250818ViewCommand
    | BetaMemoryTool20250818CreateCommand
    | BetaMemoryTool20250818StrReplaceCommand
    | BetaMemoryTool20250818InsertCommand
    | BetaMemoryTool20250818DeleteCommand
    | BetaMemoryTool20250818RenameCommand
)


def _request(tool: str, arguments: object) -> tools_pb2.InvokeRequest:
    """One Invoke of `tool` with the arguments as Claude wrote them."""
    if not isinstance(arguments, dict):
        raise ToolError(f"Tool input must be a JSON object, got {type(arguments).__name__}")
    return tools_pb2.InvokeRequest(
        name=tool,
        arguments_json=json.dumps(arguments),
        tool_call_id=f"{tool}-{uuid.uuid4().hex}",
    )


def _answer(response: tools_pb2.InvokeResponse) -> str:
    """The envelope's text, or its error message raised as the SDK's `ToolError`."""
    envelope: dict[str, Any] = json.loads(response.envelope_json)
    if envelope["status"] == "error":
        raise ToolError(str(envelope["error"]["message"]))
    return str(envelope["text"])


def _arguments(command: _MemoryCommand) -> dict[str, object]:
    """A typed memory command back as the JSON Claude wrote."""
    return command.to_dict(mode="json")


_C = TypeVar("_C", Client, AsyncClient)


class _EditorSettings(Generic[_C]):
    """What both text-editor adapters hold: the client and the tool's settings."""

    def __init__(
        self,
        client: _C,
        *,
        max_characters: int | None = None,
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        self._client: _C = client
        self._max_characters = max_characters
        self._cache_control = cache_control

    def to_dict(self) -> BetaToolTextEditor20250728Param:
        param: BetaToolTextEditor20250728Param = {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"}
        if self._max_characters is not None:
            param["max_characters"] = self._max_characters
        if self._cache_control is not None:
            param["cache_control"] = self._cache_control
        return param

    def _request(self, input: object) -> tools_pb2.InvokeRequest:
        """The Invoke of Claude's input, with the tool's `max_characters` applied to views."""
        if self._max_characters is not None and isinstance(input, dict) and input.get("command") == "view":
            input = {"max_characters": self._max_characters, **input}
        return _request(TEXT_EDITOR_TOOL, input)


class AgentVfsMemoryTool(BetaAbstractMemoryTool):
    """Claude's memory tool with its files in agentvfs (``/memories``)."""

    def __init__(self, client: Client, *, cache_control: BetaCacheControlEphemeralParam | None = None) -> None:
        super().__init__(cache_control=cache_control)
        self._client = client

    def _run(self, command: _MemoryCommand) -> str:
        return _answer(self._client.tools.Invoke(_request(MEMORY_TOOL, _arguments(command))))

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return self._run(command)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return self._run(command)

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self._run(command)

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return self._run(command)

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return self._run(command)

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return self._run(command)

    def clear_all_memory(self) -> str:
        """Deletes everything under ``/memories``, as the SDK's local tool does."""
        try:
            entries = list(self._client.filesystem.ListInfo(filesystem_pb2.ListInfoRequest(path=MEMORIES)).entries)
        except NotFoundError:
            entries = []
        for entry in entries:
            self._client.filesystem.Delete(filesystem_pb2.DeleteRequest(path=entry.path, recursive=True))
        return "All memory cleared"


class AgentVfsAsyncMemoryTool(BetaAsyncAbstractMemoryTool):
    """`AgentVfsMemoryTool` on `agentvfs.AsyncClient`."""

    def __init__(self, client: AsyncClient, *, cache_control: BetaCacheControlEphemeralParam | None = None) -> None:
        super().__init__(cache_control=cache_control)
        self._client = client

    async def _run(self, command: _MemoryCommand) -> str:
        return _answer(await self._client.tools.Invoke(_request(MEMORY_TOOL, _arguments(command))))

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await self._run(command)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await self._run(command)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await self._run(command)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await self._run(command)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await self._run(command)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await self._run(command)

    async def clear_all_memory(self) -> str:
        """Deletes everything under ``/memories``, as the SDK's local tool does."""
        try:
            entries = list((await self._client.filesystem.ListInfo(filesystem_pb2.ListInfoRequest(path=MEMORIES))).entries)
        except NotFoundError:
            entries = []
        for entry in entries:
            await self._client.filesystem.Delete(filesystem_pb2.DeleteRequest(path=entry.path, recursive=True))
        return "All memory cleared"


class AgentVfsTextEditorTool(_EditorSettings[Client], BetaBuiltinFunctionTool):
    """Claude's text editor (``str_replace_based_edit_tool``) on agentvfs.

    Paths are absolute logical paths (``/workspace/app.py``) inside the
    server's tools root. `max_characters` is sent to Claude with the tool
    and applied to every view."""

    def call(self, input: object) -> str:
        return _answer(self._client.tools.Invoke(self._request(input)))


class AgentVfsAsyncTextEditorTool(_EditorSettings[AsyncClient], BetaAsyncBuiltinFunctionTool):
    """`AgentVfsTextEditorTool` on `agentvfs.AsyncClient`."""

    async def call(self, input: object) -> str:
        return _answer(await self._client.tools.Invoke(self._request(input)))
