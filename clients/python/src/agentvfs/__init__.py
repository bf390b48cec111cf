"""Python client of agentvfs, the gRPC file system for AI agents.

- `Client` (sync) and `AsyncClient` (asyncio): connect with an address, a
  bearer token and a session; `client.filesystem`, `client.tools` and
  `client.access` are the typed stubs of every RPC; `grep`/`glob` stream
  results with cancellation; `watch` streams changes, resuming by itself
  across reconnects; `upload`/`download` move large files in chunks.
- `AgentVfsError`: every failed call, with the envelope ``code``
  (``NOT_FOUND``, ``CONFLICT``, ...) from google.rpc.ErrorInfo; where Python
  has its own error for the case, a subclass that is also that error:
  `NotFoundError` (`FileNotFoundError`), `AlreadyExistsError`
  (`FileExistsError`), `AccessDeniedError` (`PermissionError`),
  `IsDirectoryError` (`IsADirectoryError`), `NotDirectoryError`
  (`NotADirectoryError`), and `ConflictError` with the versions of a stale
  ``if_version`` (`agentvfs.errors`).
- `commit` applies a changeset, several operations of one mount all or
  nothing: `WriteOp`, `EditOp`, `MultiEditOp` (of `Edit`s), `DeleteOp`,
  `MoveOp` (`agentvfs.changeset`); a failing operation's index is the
  error's ``operation_index``.
- Labels: ``label=`` (or `Client.with_label`) is sent as ``x-agentvfs-label``
  and kept with every change a call makes; `rewind` undoes the changes of one
  session, handle, label or changeset (``CommitResponse.changeset``), or all
  since a cursor, as one changeset (``dry_run``, ``force``).
- Branches: `create_branch` forks a directory; ``branch=`` (or
  `Client.with_branch`) is sent as ``x-agentvfs-branch`` and works in it;
  `diff_branch` pages through its changes; `merge_branch` brings them back
  as one changeset, or answers the conflicts with their three versions
  (settled by ``resolutions={path: content or DELETE}``); `discard_branch`.
- `agentvfs.deepagents.AgentVfsBackend`: a LangChain deepagents backend.
- `agentvfs.v1`: the generated messages and stubs (``scripts/generate-clients``).
"""

from agentvfs._common import BRANCH_HEADER, LABEL_HEADER
from agentvfs.aio import AsyncClient, AsyncSearch, AsyncWatch
from agentvfs.branch import DELETE, Resolution
from agentvfs.changeset import ChangesetOp, DeleteOp, Edit, EditOp, MoveOp, MultiEditOp, WriteOp
from agentvfs.client import Client, Search, Watch
from agentvfs.errors import (
    ACCESS_DENIED,
    BINARY_FILE,
    CONFLICT,
    INTERNAL_ERROR,
    INVALID_PARAM,
    IS_DIRECTORY,
    NOT_FOUND,
    TIMEOUT,
    AccessDeniedError,
    AgentVfsError,
    AlreadyExistsError,
    ConflictError,
    IsDirectoryError,
    NotDirectoryError,
    NotFoundError,
)

__all__ = [
    "ACCESS_DENIED",
    "BINARY_FILE",
    "BRANCH_HEADER",
    "CONFLICT",
    "DELETE",
    "INTERNAL_ERROR",
    "INVALID_PARAM",
    "IS_DIRECTORY",
    "LABEL_HEADER",
    "NOT_FOUND",
    "TIMEOUT",
    "AccessDeniedError",
    "AgentVfsError",
    "AlreadyExistsError",
    "AsyncClient",
    "AsyncSearch",
    "AsyncWatch",
    "ChangesetOp",
    "Client",
    "ConflictError",
    "DeleteOp",
    "Edit",
    "EditOp",
    "IsDirectoryError",
    "MoveOp",
    "MultiEditOp",
    "NotDirectoryError",
    "NotFoundError",
    "Resolution",
    "Search",
    "Watch",
    "WriteOp",
]
