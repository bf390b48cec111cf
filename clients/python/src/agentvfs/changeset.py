"""Changesets: the operations of `Client.commit` and `AsyncClient.commit`.

Each operation is the request of the single-file RPC of the same name, with
its meaning (``docs/changesets.md``): `WriteOp`, `EditOp`, `MultiEditOp`,
`DeleteOp`, `MoveOp`. A changeset applies them in order, each seeing what the
ones before it did, all on one mount and all or nothing::

    client.commit([
        WriteOp("/src/new.py", "print('hi')\\n", create_only=True),
        EditOp("/src/app.py", "old()", "new()", if_version=seen),
        MoveOp("/src/a.py", "/src/b.py"),
        DeleteOp("/src/old.py"),
    ])

When an operation fails nothing is applied and the error (`agentvfs.errors`)
carries its index in ``operation_index``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Union

from agentvfs.v1 import filesystem_pb2


@dataclass(frozen=True)
class WriteOp:
    """Writes `content` to `path`, creating it (and missing parents) or
    replacing it; `create_only` refuses an existing file, `if_version`
    requires its version (0: it must not exist)."""

    path: str
    content: str
    create_only: bool = False
    if_version: int | None = None

    def to_proto(self) -> filesystem_pb2.ChangesetOperation:
        """The operation as the message Commit sends."""
        return filesystem_pb2.ChangesetOperation(
            write=filesystem_pb2.WriteRequest(
                path=self.path, content=self.content, create_only=self.create_only, if_version=self.if_version
            )
        )


@dataclass(frozen=True)
class EditOp:
    """Replaces `old_string`, which must occur exactly once (every occurrence
    with `replace_all`), by `new_string` in the file at `path` as the
    operations before it left it."""

    path: str
    old_string: str
    new_string: str
    replace_all: bool = False
    if_version: int | None = None

    def to_proto(self) -> filesystem_pb2.ChangesetOperation:
        """The operation as the message Commit sends."""
        return filesystem_pb2.ChangesetOperation(
            edit=filesystem_pb2.EditRequest(
                path=self.path,
                old_string=self.old_string,
                new_string=self.new_string,
                replace_all=self.replace_all,
                if_version=self.if_version,
            )
        )


@dataclass(frozen=True)
class Edit:
    """One edit of a `MultiEditOp`."""

    old_string: str
    new_string: str
    replace_all: bool = False


@dataclass(frozen=True)
class MultiEditOp:
    """Applies `edits` to the file at `path`, each matched against its text
    before any of them (as MultiEdit)."""

    path: str
    edits: list[Edit] = field(default_factory=list)
    if_version: int | None = None

    def to_proto(self) -> filesystem_pb2.ChangesetOperation:
        """The operation as the message Commit sends."""
        edits = [
            filesystem_pb2.EditOperation(old_string=e.old_string, new_string=e.new_string, replace_all=e.replace_all)
            for e in self.edits
        ]
        return filesystem_pb2.ChangesetOperation(
            multi_edit=filesystem_pb2.MultiEditRequest(path=self.path, edits=edits, if_version=self.if_version)
        )


@dataclass(frozen=True)
class DeleteOp:
    """Deletes the file at `path` (a changeset deletes files, not directories)."""

    path: str
    if_version: int | None = None

    def to_proto(self) -> filesystem_pb2.ChangesetOperation:
        """The operation as the message Commit sends."""
        return filesystem_pb2.ChangesetOperation(
            delete=filesystem_pb2.DeleteRequest(path=self.path, if_version=self.if_version)
        )


@dataclass(frozen=True)
class MoveOp:
    """Moves the file at `source` to `destination` on the same mount;
    `if_version` is the source's, `create_only` refuses an existing
    destination."""

    source: str
    destination: str
    if_version: int | None = None
    create_only: bool = False

    def to_proto(self) -> filesystem_pb2.ChangesetOperation:
        """The operation as the message Commit sends."""
        return filesystem_pb2.ChangesetOperation(
            move=filesystem_pb2.MoveRequest(
                source=self.source,
                destination=self.destination,
                if_version=self.if_version,
                create_only=self.create_only,
            )
        )


#: Any operation of a changeset.
ChangesetOp = Union[WriteOp, EditOp, MultiEditOp, DeleteOp, MoveOp]


def commit_request(ops: Iterable[ChangesetOp]) -> filesystem_pb2.CommitRequest:
    """The CommitRequest of `ops`."""
    return filesystem_pb2.CommitRequest(operations=[op.to_proto() for op in ops])
