"""What the branch helpers of `Client` and `AsyncClient` build: the requests
of MergeBranch and DiffBranch (docs/branches.md)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final, Literal, Union

from agentvfs.v1 import filesystem_pb2


class _Delete(enum.Enum):
    DELETE = "DELETE"


#: A resolution of `Client.merge_branch` that deletes the file.
DELETE: Final = _Delete.DELETE

#: How a merge settles one conflicting file: its new content (``str`` is
#: UTF-8), or `DELETE`.
Resolution = Union[bytes, str, Literal[_Delete.DELETE]]


def merge_request(
    name: str, resolutions: Mapping[str, Resolution] | None, discard: bool
) -> filesystem_pb2.MergeBranchRequest:
    """The MergeBranchRequest of `Client.merge_branch`; a resolution that is
    neither content nor `DELETE` is a TypeError before any call."""
    req = filesystem_pb2.MergeBranchRequest(name=name, discard=discard)
    for path, resolution in (resolutions or {}).items():
        if resolution is DELETE:
            req.resolutions.add(path=path, delete=True)
        elif isinstance(resolution, str):
            req.resolutions.add(path=path, content=resolution.encode())
        elif isinstance(resolution, (bytes, bytearray, memoryview)):
            req.resolutions.add(path=path, content=bytes(resolution))
        else:
            kind = type(resolution).__name__
            raise TypeError(f"the resolution of {path} must be bytes, str or agentvfs.DELETE, not {kind}")
    return req


def diff_request(name: str, after: str, page_size: int) -> filesystem_pb2.DiffBranchRequest:
    """One page's DiffBranchRequest: the files after `after`, at most
    `page_size` (0: the server's 1000)."""
    return filesystem_pb2.DiffBranchRequest(name=name, after=after, limit=page_size)
