"""The Python runner of the shared conformance suite (tests/conformance/README.md):
every case through the sync `Client` and again through the `AsyncClient`."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message

from agentvfs import (
    AgentVfsError,
    AsyncClient,
    ChangesetOp,
    Client,
    ConflictError,
    DeleteOp,
    Edit,
    EditOp,
    MoveOp,
    MultiEditOp,
    WriteOp,
)
from agentvfs.v1 import access_pb2, filesystem_pb2, tools_pb2  # noqa: F401  (registers every service)

from .conftest import Server

CASES_DIR = Path(__file__).resolve().parents[3] / "tests" / "conformance"
#: `call(client, method, request, cancel_after)` → result or AgentVfsError.
Call = Callable[[Any, MethodDescriptor, dict[str, Any], "int | None"], Awaitable[Any]]


def load_cases() -> list[Any]:
    params = []
    for file in sorted(CASES_DIR.glob("*.json")):
        suite = json.loads(file.read_text())
        for case in suite["cases"]:
            params.append(pytest.param(suite, case, id=f"{file.stem}/{case['name']}"))
    return params


CASES = load_cases()


def test_the_suite_has_cases() -> None:
    """The runner found the shared case files (a wrong path must not pass silently)."""
    assert len(CASES) >= 20, CASES_DIR


@pytest.mark.parametrize(("suite", "case"), CASES)
def test_conformance_sync(suite: dict[str, Any], case: dict[str, Any], start_server: Callable[[str | None], Server]) -> None:
    """The case passes through the sync Client."""
    server = start_server(suite.get("server", {}).get("config"))
    clients: dict[tuple[str, str | None, str], Client] = {}

    def client(session: str, namespace: str | None, token: str) -> Client:
        key = (session, namespace, token)
        if key not in clients:
            clients[key] = Client(server.address, session=session, namespace=namespace, token=token or None)
        return clients[key]

    try:
        asyncio.run(run_case(suite, case, "sync", client, sync_call))
    finally:
        for c in clients.values():
            c.close()


@pytest.mark.parametrize(("suite", "case"), CASES)
async def test_conformance_async(
    suite: dict[str, Any], case: dict[str, Any], start_server: Callable[[str | None], Server]
) -> None:
    """The case passes through the AsyncClient."""
    server = start_server(suite.get("server", {}).get("config"))
    clients: dict[tuple[str, str | None, str], AsyncClient] = {}

    def client(session: str, namespace: str | None, token: str) -> AsyncClient:
        key = (session, namespace, token)
        if key not in clients:
            clients[key] = AsyncClient(server.address, session=session, namespace=namespace, token=token or None)
        return clients[key]

    try:
        await run_case(suite, case, "async", client, async_call)
    finally:
        for c in clients.values():
            await c.close()


async def run_case(
    suite: dict[str, Any], case: dict[str, Any], mode: str, client: Callable[[str, str | None, str], Any], call: Call
) -> None:
    variables: dict[str, Any] = {}
    for i, step in enumerate(case["steps"]):
        session = f"{mode}.{case['name']}" + (f".{step['session']}" if "session" in step else "")
        namespace = f"{mode}.{case['name']}.{step['namespace']}" if "namespace" in step else None
        token = step.get("token", suite.get("token", ""))
        service, method = step["call"].split(".")
        md = descriptor_pool.Default().FindServiceByName(f"agentvfs.v1.{service}").methods_by_name[method]
        request = substitute(step.get("request", {}), variables)
        where = f"step {i} ({step['call']})"
        try:
            c = client(session, namespace, token)
            if "label" in step:
                c = c.with_label(step["label"])
            if "branch" in step:
                c = c.with_branch(step["branch"])
            result = await call(c, md, request, step.get("cancel_after"))
        except AgentVfsError as err:
            assert "error" in step, f"{where}: unexpected error {err}"
            check(where, substitute(step["error"], variables), error_json(err))
            continue
        assert "error" not in step, f"{where}: expected an error, got {result}"
        if "expect" in step:
            check(where, substitute(step["expect"], variables), result)
        for name, path in step.get("save", {}).items():
            value: Any = result
            for key in path.split("."):
                value = value[key]
            variables[name] = value


#: Each native error a runner reports, by its name (tests/conformance/README.md).
NATIVE: dict[type[Exception], str] = {
    FileNotFoundError: "not_found",
    FileExistsError: "exists",
    PermissionError: "permission",
    IsADirectoryError: "is_directory",
    NotADirectoryError: "not_directory",
    ConflictError: "conflict",
}


def error_json(err: AgentVfsError) -> dict[str, Any]:
    """An error as every runner reports it, with the native error it is."""
    out: dict[str, Any] = {
        "grpc": err.grpc_code.name,
        "code": err.code,
        "message": err.message,
        "metadata": err.metadata,
        "native": next((name for cls, name in NATIVE.items() if isinstance(err, cls)), ""),
    }
    if err.operation_index is not None:
        out["operation_index"] = err.operation_index
    if isinstance(err, ConflictError):
        out["conflict"] = {
            "path": err.path,
            "expected_version": str(err.expected_version),
            "actual_version": str(err.actual_version),
        }
    return out


def new_request(md: MethodDescriptor, request: dict[str, Any]) -> Message:
    return json_format.ParseDict(request, message_factory.GetMessageClass(md.input_type)())


def to_dict(msg: Message | None) -> dict[str, Any]:
    return {} if msg is None else json_format.MessageToDict(msg, preserving_proto_field_name=True)


def optional_version(req: Any) -> int | None:
    """A request's if_version, None when absent."""
    return req.if_version if req.HasField("if_version") else None


def commit_ops(req: filesystem_pb2.CommitRequest) -> list[ChangesetOp]:
    """A Commit step's operations as the client's op builders."""
    ops: list[ChangesetOp] = []
    for op in req.operations:
        kind = op.WhichOneof("operation")
        if kind == "write":
            w = op.write
            ops.append(WriteOp(w.path, w.content, create_only=w.create_only, if_version=optional_version(w)))
        elif kind == "edit":
            e = op.edit
            ops.append(EditOp(e.path, e.old_string, e.new_string, replace_all=e.replace_all, if_version=optional_version(e)))
        elif kind == "multi_edit":
            m = op.multi_edit
            edits = [Edit(x.old_string, x.new_string, replace_all=x.replace_all) for x in m.edits]
            ops.append(MultiEditOp(m.path, edits, if_version=optional_version(m)))
        elif kind == "delete":
            assert not op.delete.recursive, "the client's DeleteOp has no recursive"
            ops.append(DeleteOp(op.delete.path, if_version=optional_version(op.delete)))
        elif kind == "move":
            mv = op.move
            ops.append(MoveOp(mv.source, mv.destination, if_version=optional_version(mv), create_only=mv.create_only))
        else:
            raise AssertionError(f"an operation of no kind: {op}")
    return ops


def rewind_args(req: filesystem_pb2.RewindRequest) -> dict[str, Any]:
    """The rewind() arguments of a Rewind step: its one selector by name."""
    selector = req.WhichOneof("selector")
    args: dict[str, Any] = {"path": req.path or "/", "dry_run": req.dry_run, "force": req.force}
    if selector is not None:
        args[selector] = getattr(req, selector)
    return args


def upload_args(request: dict[str, Any]) -> tuple[str, bytes, bool, int | None]:
    header = json_format.ParseDict(request["header"], filesystem_pb2.WriteBytesHeader())
    data = b"".join(
        (p["text"].encode() if "text" in p else base64.b64decode(p["base64"])) * p.get("repeat", 1)
        for p in request["data"]
    )
    return header.path, data, header.create_only, header.if_version if header.HasField("if_version") else None


def version_of(req: Any) -> int | None:
    """ReadBytesRequest.version, None when absent."""
    return req.version if req.HasField("version") else None


def download_result(info: filesystem_pb2.FileInfo, data: bytes) -> dict[str, Any]:
    return {"info": to_dict(info), "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


SEARCH_LISTS = {"Grep": "matches", "Glob": "entries"}


def watch_args(req: filesystem_pb2.WatchRequest) -> dict[str, Any]:
    """The watch() arguments of a Watch step, which must stop at the head."""
    assert req.stop_at_head, "a Watch step must set stop_at_head"
    return {"path": req.path, "cursor": req.cursor, "from_now": req.from_now, "stop_at_head": True}


async def sync_call(client: Client, md: MethodDescriptor, request: dict[str, Any], cancel_after: int | None) -> Any:
    if md.client_streaming:
        path, data, create_only, if_version = upload_args(request)
        return to_dict(client.upload(path, data, create_only=create_only, if_version=if_version))
    req = new_request(md, request)
    if md.name in SEARCH_LISTS:
        search = client.grep(req) if md.name == "Grep" else client.glob(req)  # type: ignore[arg-type]
        items: list[Any] = []
        if cancel_after == 0:
            search.cancel()
        for item in search:
            items.append(to_dict(item))
            if cancel_after is not None and len(items) >= cancel_after:
                search.cancel()
        return {SEARCH_LISTS[md.name]: items, "summary": to_dict(search.summary)}
    if md.name == "ReadBytes":
        out = io.BytesIO()
        info = client.download(req.path, out, version=version_of(req))  # type: ignore[attr-defined]
        return download_result(info, out.getvalue())
    if md.name == "Commit":
        return to_dict(client.commit(commit_ops(req)))  # type: ignore[arg-type]
    if md.name == "Rewind":
        return to_dict(client.rewind(**rewind_args(req)))  # type: ignore[arg-type]
    if md.name == "Watch":
        watch = client.watch(**watch_args(req))  # type: ignore[arg-type]
        events = [to_dict(e) for e in watch]
        return {"events": events, "cursor": watch.cursor}
    stub = getattr(client, md.containing_service.name.lower())
    return to_dict(getattr(stub, md.name)(req))


async def async_call(client: AsyncClient, md: MethodDescriptor, request: dict[str, Any], cancel_after: int | None) -> Any:
    if md.client_streaming:
        path, data, create_only, if_version = upload_args(request)
        return to_dict(await client.upload(path, data, create_only=create_only, if_version=if_version))
    req = new_request(md, request)
    if md.name in SEARCH_LISTS:
        search = client.grep(req) if md.name == "Grep" else client.glob(req)  # type: ignore[arg-type]
        items: list[Any] = []
        if cancel_after == 0:
            search.cancel()
        try:
            async for item in search:
                items.append(to_dict(item))
                if cancel_after is not None and len(items) >= cancel_after:
                    search.cancel()
        except asyncio.CancelledError:
            # asyncio's idiom: a cancelled call raises CancelledError. Only the
            # runner's own cancel() may end here.
            assert cancel_after is not None
            raise AgentVfsError("", grpc.StatusCode.CANCELLED, "cancelled", {}) from None
        return {SEARCH_LISTS[md.name]: items, "summary": to_dict(search.summary)}
    if md.name == "ReadBytes":
        out = io.BytesIO()
        info = await client.download(req.path, out, version=version_of(req))  # type: ignore[attr-defined]
        return download_result(info, out.getvalue())
    if md.name == "Commit":
        return to_dict(await client.commit(commit_ops(req)))  # type: ignore[arg-type]
    if md.name == "Rewind":
        return to_dict(await client.rewind(**rewind_args(req)))  # type: ignore[arg-type]
    if md.name == "Watch":
        watch = client.watch(**watch_args(req))  # type: ignore[arg-type]
        events = [to_dict(e) async for e in watch]
        return {"events": events, "cursor": watch.cursor}
    stub = getattr(client, md.containing_service.name.lower())
    return to_dict(await getattr(stub, md.name)(req))


def substitute(value: Any, variables: dict[str, Any]) -> Any:
    """Replaces "${var}" strings by saved values, and ${var} inside a longer
    string by the value's text."""
    if isinstance(value, str) and value.startswith("${") and value.endswith("}") and value[2:-1] in variables:
        return variables[value[2:-1]]
    if isinstance(value, str):
        return re.sub(r"\$\{(\w+)\}", lambda m: text(variables[m[1]]) if m[1] in variables else m[0], value)
    if isinstance(value, list):
        return [substitute(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, variables) for k, v in value.items()}
    return value


def text(value: Any) -> str:
    """A saved value inside a string: a string as is, a number in decimal."""
    if isinstance(value, str):
        return value
    if is_number(value) and float(value).is_integer():
        return str(int(value))
    return json.dumps(value)


_MISSING = object()


def check(where: str, expected: Any, actual: Any) -> None:
    problems: list[str] = []
    check_at("$", expected, actual, problems)
    assert not problems, f"{where}: {'; '.join(problems)} in {json.dumps(actual)}"


def check_at(at: str, expected: Any, actual: Any, problems: list[str]) -> None:
    if isinstance(expected, dict) and any(k.startswith("$") for k in expected):
        for op, arg in expected.items():
            if op == "$json" and isinstance(actual, str):
                try:
                    parsed = json.loads(actual)
                except ValueError as err:
                    problems.append(f"{at}: not JSON ({err}): {actual!r}")
                    continue
                check_at(f"{at}<json>", arg, parsed, problems)
                continue
            ok = (op == "$contains" and isinstance(actual, str) and arg in actual) or (
                op == "$gte" and number(actual) is not None and number(actual) >= number(arg)  # type: ignore[operator]
            )
            if not ok:
                problems.append(f"{at}: {actual!r} fails {op} {arg!r}")
    elif isinstance(expected, dict):
        if actual is not _MISSING and not isinstance(actual, dict):
            problems.append(f"{at}: expected an object, got {actual!r}")
            return
        for key, value in expected.items():
            got = actual.get(key, _MISSING) if isinstance(actual, dict) else _MISSING
            check_at(f"{at}.{key}", value, got, problems)
    elif isinstance(expected, list):
        got_list = [] if actual is _MISSING else actual
        if not isinstance(got_list, list) or len(got_list) != len(expected):
            problems.append(f"{at}: expected {len(expected)} items, got {actual!r}")
            return
        for i, (e, a) in enumerate(zip(expected, got_list)):
            check_at(f"{at}[{i}]", e, a, problems)
    elif actual is _MISSING:
        if not is_default(expected):
            problems.append(f"{at}: expected {expected!r}, got nothing")
    elif is_number(expected) or is_number(actual):
        if number(expected) is None or number(expected) != number(actual):
            problems.append(f"{at}: expected {expected!r}, got {actual!r}")
    elif expected != actual:
        problems.append(f"{at}: expected {expected!r}, got {actual!r}")


def is_default(v: Any) -> bool:
    """The values proto JSON omits."""
    if v is None or v is False or (is_number(v) and v == 0):
        return True
    return isinstance(v, str) and (v in ("", "0") or v.endswith("_UNSPECIFIED"))


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def number(v: Any) -> float | None:
    if is_number(v):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None
