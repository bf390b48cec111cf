"""The errors of both clients: every failed call raises `AgentVfsError`, or
the subclass of it that is also Python's own error for the case.

Built from the gRPC status and the `google.rpc.ErrorInfo` the server attaches
in the `grpc-status-details-bin` trailer, whose `reason` is the envelope code.
The codes are the `ErrorReason` enum of the contract without its prefix
(`proto/agentvfs/v1/errors.proto`, which documents each one's gRPC codes and
metadata), so they are spelled in one place. The subclasses:

- NOT_FOUND: `NotFoundError`, a `FileNotFoundError`;
- CONFLICT of a create-only write (gRPC ALREADY_EXISTS): `AlreadyExistsError`,
  a `FileExistsError`;
- CONFLICT of a stale ``if_version`` (gRPC ABORTED): `ConflictError`, with
  the versions;
- ACCESS_DENIED: `AccessDeniedError`, a `PermissionError`;
- IS_DIRECTORY: `IsDirectoryError`, an `IsADirectoryError`;
- INVALID_PARAM for a path below a file (gRPC FAILED_PRECONDITION with a
  ``path``): `NotDirectoryError`, a `NotADirectoryError`.
"""

from __future__ import annotations

from typing import Any, Final

import grpc
from google.rpc import error_details_pb2, status_pb2

from agentvfs.v1 import errors_pb2

#: google.rpc.ErrorInfo.domain of the server's errors.
ERROR_DOMAIN: Final = "agentvfs"

#: Each envelope code (the wire spelling of a reason) with its `ErrorReason`.
_REASONS: Final = {name.removeprefix("ERROR_REASON_"): value for name, value in errors_pb2.ErrorReason.items()}


def _code(reason: errors_pb2.ErrorReason.ValueType) -> str:
    """The envelope code of `reason` (``NOT_FOUND``)."""
    return errors_pb2.ErrorReason.Name(reason).removeprefix("ERROR_REASON_")


# Envelope codes (ErrorInfo.reason), the same as the Tools envelope's.
INVALID_PARAM: Final = _code(errors_pb2.ERROR_REASON_INVALID_PARAM)
NOT_FOUND: Final = _code(errors_pb2.ERROR_REASON_NOT_FOUND)
ACCESS_DENIED: Final = _code(errors_pb2.ERROR_REASON_ACCESS_DENIED)
CONFLICT: Final = _code(errors_pb2.ERROR_REASON_CONFLICT)
IS_DIRECTORY: Final = _code(errors_pb2.ERROR_REASON_IS_DIRECTORY)
BINARY_FILE: Final = _code(errors_pb2.ERROR_REASON_BINARY_FILE)
TIMEOUT: Final = _code(errors_pb2.ERROR_REASON_TIMEOUT)
INTERNAL_ERROR: Final = _code(errors_pb2.ERROR_REASON_INTERNAL_ERROR)


class AgentVfsError(Exception):
    """A failed call.

    Attributes:
        code: the envelope code (``NOT_FOUND``, ``CONFLICT``, ...), or ``""``
            when the error did not come from the agentvfs server (cancelled,
            unreachable, ...).
        reason: `code` as the contract's `ErrorReason` (``UNSPECIFIED``
            when `code` is empty or new to this client).
        grpc_code: the gRPC status code.
        message: the server's explanation.
        metadata: ``ErrorInfo.metadata`` (``path``, ``expected_version``, ...).
        operation_index: the index (from 0) of the changeset operation that
            failed, when the error is a `commit`'s naming one, else None.
    """

    def __init__(self, code: str, grpc_code: grpc.StatusCode, message: str, metadata: dict[str, str]) -> None:
        super().__init__(f"{code or grpc_code.name}: {message}")
        self.code = code
        self.reason = _REASONS.get(code, errors_pb2.ERROR_REASON_UNSPECIFIED)
        self.grpc_code = grpc_code
        self.message = message
        self.metadata = metadata
        index = metadata.get("operation_index", "")
        self.operation_index: int | None = int(index) if index.isdigit() else None


class NotFoundError(AgentVfsError, FileNotFoundError):
    """NOT_FOUND: the path does not exist, or the file keeps no such version."""


class AlreadyExistsError(AgentVfsError, FileExistsError):
    """CONFLICT of a create-only write (gRPC ALREADY_EXISTS): the file is there."""


class ConflictError(AgentVfsError):
    """CONFLICT of a conditional write (gRPC ABORTED): the file's version was
    not the `if_version` the call expected; read it again and retry.

    Attributes:
        path: the file's path.
        expected_version: the version the call expected.
        actual_version: the file's version (0: it does not exist).
    """

    def __init__(self, code: str, grpc_code: grpc.StatusCode, message: str, metadata: dict[str, str]) -> None:
        super().__init__(code, grpc_code, message, metadata)
        self.path = metadata.get("path", "")
        self.expected_version = int(metadata.get("expected_version", "0"))
        self.actual_version = int(metadata.get("actual_version", "0"))


class AccessDeniedError(AgentVfsError, PermissionError):
    """ACCESS_DENIED: no grant for the operation on the path, or no (known) token."""


class IsDirectoryError(AgentVfsError, IsADirectoryError):
    """IS_DIRECTORY: a file operation named a directory."""


class NotDirectoryError(AgentVfsError, NotADirectoryError):
    """INVALID_PARAM with gRPC FAILED_PRECONDITION and a ``path``: a directory
    operation named a file, or a path below a file."""


def _error_class(code: str, grpc_code: grpc.StatusCode, metadata: dict[str, str]) -> type[AgentVfsError]:
    """The class of the error with this code, gRPC code and metadata (the
    module's doc lists them)."""
    if code == NOT_FOUND:
        return NotFoundError
    if code == CONFLICT:
        return AlreadyExistsError if grpc_code == grpc.StatusCode.ALREADY_EXISTS else ConflictError
    if code == ACCESS_DENIED:
        return AccessDeniedError
    if code == IS_DIRECTORY:
        return IsDirectoryError
    if code == INVALID_PARAM and grpc_code == grpc.StatusCode.FAILED_PRECONDITION and "path" in metadata:
        return NotDirectoryError
    return AgentVfsError


def error_from(err: grpc.RpcError) -> AgentVfsError:
    """The `AgentVfsError` of a failed call (sync or asyncio)."""
    call: Any = err  # sync errors are grpc.Call, asyncio ones AioRpcError
    code, message, metadata = "", call.details() or "", {}
    for key, value in call.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        status = status_pb2.Status.FromString(value)
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info) and info.domain == ERROR_DOMAIN:
                code, metadata = info.reason, dict(info.metadata)
    grpc_code = call.code()
    return _error_class(code, grpc_code, metadata)(code, grpc_code, message, metadata)
