"""The MCP endpoint through the official MCP Python SDK, on both transports
(docs/mcp.md): the same tools as ListTools, every tool called, envelopes as
results, grants, authentication, sessions, and files as resources."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import subprocess
from typing import Any

import httpx2
import pytest
from agentvfs import Client as GrpcClient
from agentvfs.changeset import WriteOp
from agentvfs.v1 import tools_pb2
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import BlobResourceContents, CallToolResult, Implementation, TextResourceContents

from conftest import PRINCIPALS, TRANSPORTS, Server, connect, http_client, stdio_client

ENVELOPE_KEYS = ["status", "data", "text", "stats", "context"]


def messages(err: BaseException) -> str:
    """Every message in `err`, exception groups (the SDK's task groups) flattened."""
    if isinstance(err, BaseExceptionGroup):
        return " | ".join(messages(e) for e in err.exceptions)
    return str(err)


def envelope(result: CallToolResult) -> dict:
    """The envelope a tool result carries, checked for the MCP shape:
    the envelope's text as the one text content, the envelope whole as
    structured content, isError exactly for error envelopes."""
    env = result.structured_content
    assert isinstance(env, dict)
    assert list(env)[:5] == ENVELOPE_KEYS
    assert [c.type for c in result.content] == ["text"]
    assert result.content[0].text == env["text"]  # type: ignore[union-attr]
    assert bool(result.is_error) == (env["status"] == "error")
    assert ("error" in env) == (env["status"] == "error")
    return env


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_tools_are_the_grpc_tools_with_annotations(server: Server, transport: str) -> None:
    grpc = GrpcClient(server.address)
    specs = grpc.tools.ListTools(tools_pb2.ListToolsRequest()).tools
    async with connect(transport, server) as client:
        assert client.server_info is not None and client.server_info.name == "agentvfs"
        tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == [s.name for s in specs]
    for tool, spec in zip(tools, specs, strict=True):
        assert tool.description == spec.description
        assert tool.input_schema == json.loads(spec.parameters_json_schema)
        assert tool.annotations is not None
        read_only = tool.name in {"LS", "Glob", "Grep", "Read", "BranchList", "BranchDiff"}
        assert tool.annotations.read_only_hint is read_only, tool.name
        # A fork adds a branch and changes no file.
        destructive = not read_only and tool.name != "BranchCreate"
        assert tool.annotations.destructive_hint is destructive, tool.name
        idempotent = read_only or tool.name in {"Delete", "BranchDiscard"}
        assert tool.annotations.idempotent_hint is idempotent, tool.name


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_every_tool_answers_in_the_envelope(server: Server, transport: str) -> None:
    grpc = GrpcClient(server.address)
    base = f"workspace/{transport}"
    async with connect(transport, server) as client:
        env = envelope(await client.call_tool("Write", {"path": f"{base}/a.py", "content": "x = 1\ny = 2\n"}))
        assert env["status"] == "success", env
        env = envelope(await client.call_tool("Read", {"path": f"{base}/a.py"}))
        assert "     1\tx = 1" in env["text"]
        edit = {"path": f"{base}/a.py", "old_string": "x = 1", "new_string": "x = 10"}
        env = envelope(await client.call_tool("Edit", {**edit, "expected_version": env["stats"]["version"]}))
        assert env["status"] == "success", env
        version = envelope(await client.call_tool("Read", {"path": f"{base}/a.py"}))["stats"]["version"]
        edits = [
            {"old_string": "y = 2", "new_string": "y = 20"},
            {"old_string": "x = 10", "new_string": "x = 100"},
        ]
        env = envelope(
            await client.call_tool("MultiEdit", {"path": f"{base}/a.py", "edits": edits, "expected_version": version})
        )
        assert env["status"] == "success", env
        env = envelope(await client.call_tool("LS", {"path": base}))
        assert [e["path"] for e in env["data"]["entries"]] == [f"{base}/a.py"]
        env = envelope(await client.call_tool("Glob", {"pattern": "**/*.py", "path": base}))
        assert f"{base}/a.py" in env["text"]
        env = envelope(await client.call_tool("Grep", {"pattern": "y = 20", "path": base, "output_mode": "content"}))
        assert "y = 20" in env["text"]
        patch = "*** Begin Patch\n*** Update File: a.py\n@@\n-y = 20\n+y = 200\n*** Add File: b.py\n+z = 3\n*** End Patch\n"
        env = envelope(await client.call_tool("ApplyPatch", {"patch": patch, "root": base}))
        assert env["status"] == "success", env
        assert env["text"].splitlines()[1].startswith(f"M {base}/a.py (version "), env
    # What MCP wrote is what gRPC reads.
    out = io.BytesIO()
    grpc.download(f"/{base}/a.py", out)
    assert out.getvalue() == b"x = 100\ny = 200\n"


#: A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4//8/AAX+Av6nNYGEAAAAAElFTkSuQmCC"
)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_media_reads_are_image_content_or_embedded_resources(server: Server, transport: str) -> None:
    """Read of an image answers its text, then MCP image content with the
    MIME type its bytes give (the file has no extension) and the bytes in
    base64; a PDF an embedded blob resource named by its URI. The envelope
    in structuredContent carries the same."""
    (server.root / f"shot-{transport}").write_bytes(PNG)
    pdf = b"%PDF-1.4\n%%EOF\n"
    (server.root / f"doc-{transport}.pdf").write_bytes(pdf)
    async with connect(transport, server) as client:
        result = await client.call_tool("Read", {"path": f"workspace/shot-{transport}"})
        assert not result.is_error
        assert [c.type for c in result.content] == ["text", "image"]
        text, image = result.content
        assert text.text.startswith(f"Read image 'workspace/shot-{transport}' (image/png, ")  # type: ignore[union-attr]
        assert image.mime_type == "image/png"  # type: ignore[union-attr]
        assert base64.b64decode(image.data) == PNG  # type: ignore[union-attr]
        assert result.structured_content is not None
        assert result.structured_content["data"]["mime_type"] == "image/png"

        result = await client.call_tool("Read", {"path": f"workspace/doc-{transport}.pdf"})
        assert [c.type for c in result.content] == ["text", "resource"]
        resource = result.content[1].resource  # type: ignore[union-attr]
        assert isinstance(resource, BlobResourceContents)
        assert resource.mime_type == "application/pdf"
        assert str(resource.uri) == f"agentvfs:///workspace/doc-{transport}.pdf"
        assert base64.b64decode(resource.blob) == pdf


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_delete_move_and_copy_are_tools(server: Server, transport: str) -> None:
    """The three changing tools over MCP, in envelopes like the others."""
    base = f"workspace/dmc-{transport}"
    async with connect(transport, server) as client:
        assert envelope(await client.call_tool("Write", {"path": f"{base}/a.txt", "content": "a\n"}))["status"] == "success"
        env = envelope(await client.call_tool("Copy", {"source": f"{base}/a.txt", "destination": f"{base}/b.txt"}))
        assert env["text"] == f"Copied '{base}/a.txt' to '{base}/b.txt' (2 bytes).", env
        env = envelope(await client.call_tool("Move", {"source": f"{base}/b.txt", "destination": f"{base}/c.txt"}))
        assert env["text"] == f"Moved '{base}/b.txt' to '{base}/c.txt'.", env
        env = envelope(await client.call_tool("Delete", {"path": f"{base}/a.txt"}))
        assert env["text"] == f"Deleted '{base}/a.txt'.", env
    assert sorted(p.name for p in (server.root / f"dmc-{transport}").iterdir()) == ["c.txt"]


@pytest.mark.parametrize("transport", ["http", "http-legacy"])
async def test_branch_tools_fork_work_in_a_branch_and_merge(server: Server, transport: str) -> None:
    """The branch tools over MCP (docs/tools.md § Branches): fork a Store directory, work in
    the branch over a connection sending x-agentvfs-branch (docs/mcp.md § Who calls), read the
    diff, meet a conflict that applies nothing, and merge with a resolution."""
    base, name = f"/memories/br-{transport}", f"mcp-{transport}"
    async with connect(transport, server) as client:
        env = envelope(await client.call_tool("Write", {"path": f"{base}/a.txt", "content": "one\ntwo\n"}))
        assert env["status"] == "success", env
        env = envelope(await client.call_tool("BranchCreate", {"name": name, "path": base}))
        assert env["data"]["name"] == name, env
    mode = "legacy" if transport == "http-legacy" else "auto"
    async with http_client(server.url, headers={"x-agentvfs-branch": name}, mode=mode) as inside:
        version = envelope(await inside.call_tool("Read", {"path": f"{base}/a.txt"}))["stats"]["version"]
        edit = {"path": f"{base}/a.txt", "content": "one\nbranch\n", "expected_version": version}
        assert envelope(await inside.call_tool("Write", edit))["status"] == "success"
    async with connect(transport, server) as client:
        # The base is untouched by the branch's write.
        assert "     2\ttwo" in envelope(await client.call_tool("Read", {"path": f"{base}/a.txt"}))["text"]
        env = envelope(await client.call_tool("BranchDiff", {"name": name}))
        assert env["data"]["files"] == [{"path": f"{base[1:]}/a.txt", "kind": "changed"}], env
        version = envelope(await client.call_tool("Read", {"path": f"{base}/a.txt"}))["stats"]["version"]
        edit = {"path": f"{base}/a.txt", "content": "one\nbase\n", "expected_version": version}
        assert envelope(await client.call_tool("Write", edit))["status"] == "success"
        result = await client.call_tool("BranchMerge", {"name": name})
        assert result.is_error
        env = envelope(result)
        assert env["error"]["code"] == "CONFLICT", env
        assert env["data"]["conflicts"][0]["branch"] == "one\nbranch\n", env
        assert env["data"]["conflicts"][0]["base"] == "one\nbase\n", env
        assert env["data"]["conflicts"][0]["ancestor"] == "one\ntwo\n", env
        resolution = {"path": f"{base}/a.txt", "content": "one\nboth\n"}
        env = envelope(await client.call_tool("BranchMerge", {"name": name, "resolutions": [resolution], "discard": True}))
        assert env["status"] == "success" and env["data"]["discarded"], env
        assert "     2\tboth" in envelope(await client.call_tool("Read", {"path": f"{base}/a.txt"}))["text"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_failures_are_error_envelopes(server: Server, transport: str) -> None:
    async with connect(transport, server) as client:
        env = envelope(await client.call_tool("Read", {"path": "workspace/missing.txt"}))
        assert env["error"]["code"] == "NOT_FOUND"
        env = envelope(await client.call_tool("Read", {}))
        assert env["error"]["code"] == "INVALID_PARAM"
        env = envelope(await client.call_tool("Read", {"path": "../../etc/passwd"}))
        assert env["error"]["code"] == "ACCESS_DENIED"


async def test_the_bearer_token_selects_the_principal_and_its_grants(secured: Server) -> None:
    (secured.root / "pub").mkdir(exist_ok=True)
    (secured.root / "pub" / "notes.md").write_text("# notes\n")
    (secured.root / "private.txt").write_text("secret\n")
    async with http_client(secured.url, headers={"authorization": "Bearer reader-token"}) as reader:
        env = envelope(await reader.call_tool("Read", {"path": "workspace/pub/notes.md"}))
        assert env["status"] == "success"
        env = envelope(await reader.call_tool("Read", {"path": "workspace/private.txt"}))
        assert env["error"]["code"] == "ACCESS_DENIED"
        env = envelope(await reader.call_tool("Write", {"path": "workspace/pub/new.md", "content": "x"}))
        assert env["error"]["code"] == "ACCESS_DENIED"
    assert not (secured.root / "pub" / "new.md").exists()
    async with http_client(secured.url, headers={"authorization": "Bearer full-token"}) as full:
        env = envelope(await full.call_tool("Write", {"path": "workspace/pub/new.md", "content": "x"}))
        assert env["status"] == "success"


async def test_unauthenticated_http_is_refused(secured: Server) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient() as http:
        for auth in [None, "Bearer wrong-token", "Basic Zm9vOmJhcg=="]:
            sent = {**headers, **({"authorization": auth} if auth else {})}
            response = await http.post(secured.url, json=body, headers=sent)
            assert response.status_code == 401, (auth, response.text)
            assert response.headers["www-authenticate"].startswith("Bearer")
            assert response.json()["error"]["message"]
    with pytest.raises(Exception):  # noqa: B017 (the SDK's error type is its own concern)
        async with http_client(secured.url) as client:
            await client.list_tools()


async def test_stdio_runs_as_the_principal_its_token_names(secured: Server) -> None:
    config = secured.config.with_name("stdio-secured.toml")
    config.write_text(secured.config.read_text().replace("/store", "/store-stdio-secured"))
    (secured.root / "pub").mkdir(exist_ok=True)
    async with stdio_client(config, token="reader-token") as reader:
        env = envelope(await reader.call_tool("LS", {"path": "workspace/pub"}))
        assert env["status"] == "success"
        env = envelope(await reader.call_tool("Write", {"path": "workspace/pub/x.md", "content": "x"}))
        assert env["error"]["code"] == "ACCESS_DENIED"
    # No token, or a wrong one, and the server refuses to start, saying why.
    for token in [None, "wrong"]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTVFS_")}
        if token:
            env["AGENTVFS_TOKEN"] = token
        done = subprocess.run(
            [os.environ["AGENTVFS_BIN"], "mcp", "--config", str(config)],
            input=b"",
            capture_output=True,
            env=env,
            timeout=30,
        )
        assert done.returncode != 0
        assert b"token" in done.stderr, done.stderr
        assert done.stdout == b""


async def test_mcp_sessions_are_state_sessions(server: Server) -> None:
    # On a protocol version with sessions, each MCP session is its own State
    # session: a scratch file written in one is not seen by another.
    async with http_client(server.url, mode="legacy") as one, http_client(server.url, mode="legacy") as two:
        env = envelope(await one.call_tool("Write", {"path": "scratch/plan.md", "content": "mine\n"}))
        assert env["status"] == "success"
        assert envelope(await one.call_tool("Read", {"path": "scratch/plan.md"}))["status"] == "success"
        env = envelope(await two.call_tool("Read", {"path": "scratch/plan.md"}))
        assert env["error"]["code"] == "NOT_FOUND"
    # x-agentvfs-session names the State session explicitly, on any version.
    headers = {"x-agentvfs-session": "shared-run"}
    async with http_client(server.url, headers=headers) as writer:
        envelope(await writer.call_tool("Write", {"path": "scratch/shared.md", "content": "ours\n"}))
    async with http_client(server.url, headers=headers, mode="legacy") as reader:
        env = envelope(await reader.call_tool("Read", {"path": "scratch/shared.md"}))
        assert "ours" in env["text"]
    # On the stateless protocol, each client program has its own State
    # session (mcp:<clientInfo.name>) unless it names one.
    def program(name: str) -> dict[str, Any]:
        return {"client_info": Implementation(name=name, version="1")}

    async with http_client(server.url, **program("agent-a")) as a, http_client(server.url, **program("agent b")) as b:
        assert a.protocol_version >= "2026-07-28"
        envelope(await a.call_tool("Write", {"path": "scratch/stateless.md", "content": "a's\n"}))
        envelope(await b.call_tool("Write", {"path": "scratch/stateless.md", "content": "b's\n"}))
        assert "a's" in envelope(await a.call_tool("Read", {"path": "scratch/stateless.md"}))["text"]
        assert "b's" in envelope(await b.call_tool("Read", {"path": "scratch/stateless.md"}))["text"]
    # Each session's files are where the rule says, for any front end to read.
    for session, text in [("mcp:agent-a", b"a's\n"), ("mcp:agent-b", b"b's\n")]:
        out = io.BytesIO()
        GrpcClient(server.address, session=session).download("/scratch/stateless.md", out)
        assert out.getvalue() == text
    # Two instances of one program share it unless each names its own.
    async with http_client(server.url, **program("twin")) as one, http_client(
        server.url, headers={"x-agentvfs-session": "twin-2"}, **program("twin")
    ) as two:
        envelope(await one.call_tool("Write", {"path": "scratch/twin.md", "content": "one\n"}))
        assert envelope(await two.call_tool("Read", {"path": "scratch/twin.md"}))["error"]["code"] == "NOT_FOUND"
    with pytest.raises(BaseException) as refused:
        async with http_client(server.url, headers={"x-agentvfs-session": "bad/name"}) as bad:
            await bad.list_tools()
    assert "invalid session name" in messages(refused.value)


async def test_sessions_are_bounded(start_server) -> None:  # type: ignore[no-untyped-def]
    # One principal's share is the whole pool of 2 here (a share defaults to
    # at most its pool): a third session ends the least recently used one
    # instead of being refused (docs/mcp.md § Bounds).
    bounded = start_server("[mcp]\nmax_sessions = 2\n")
    async with http_client(bounded.url, mode="legacy"), http_client(bounded.url, mode="legacy"):
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        }
        async with httpx2.AsyncClient() as http:
            response = await http.post(
                bounded.url, json=body, headers={"accept": "application/json, text/event-stream"}
            )
        assert response.status_code == 200, response.text
        assert response.headers.get("mcp-session-id")
    # Closed sessions (the SDK sends DELETE) free their places.
    async with http_client(bounded.url, mode="legacy") as client:
        assert (await client.list_tools()).tools


async def test_large_results_are_budgeted_and_saved(start_server) -> None:  # type: ignore[no-untyped-def]
    small = start_server("[tools]\nmax_output_lines = 200\n")
    (small.root / "big.txt").write_text("".join(f"line {i}\n" for i in range(5000)))
    async with http_client(small.url) as client:
        env = envelope(await client.call_tool("Read", {"path": "workspace/big.txt"}))
        assert env["status"] == "partial"
        saved = re.search(r"Full result saved to '(large_tool_results/mcp-[0-9a-f]{16})'", env["text"])
        assert saved, env["text"][:300]
        full = envelope(await client.call_tool("Grep", {"pattern": "line 499$", "path": saved.group(1)}))
        assert full["status"] == "success", full


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_files_are_resources(server: Server, transport: str) -> None:
    top = server.root / f"res-{transport}"
    (top / "docs").mkdir(parents=True)
    (top / "docs" / "read me.md").write_text("# hello\n")
    (top / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    async with connect(transport, server) as client:
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["agentvfs://{+path}"]
        listed = {}
        cursor = None
        while True:
            page = await client.list_resources(cursor=cursor)
            listed.update({r.uri: r for r in page.resources})
            cursor = page.next_cursor
            if cursor is None:
                break
        prefix = f"agentvfs:///workspace/res-{transport}/"
        mine = sorted(uri for uri in listed if uri.startswith(prefix))
        assert mine == [prefix + "docs/read%20me.md", prefix + "logo.png"]
        md = listed[prefix + "docs/read%20me.md"]
        assert (md.mime_type, md.size) == ("text/markdown", 8)
        text = (await client.read_resource(prefix + "docs/read%20me.md")).contents
        assert isinstance(text[0], TextResourceContents)
        assert (text[0].text, text[0].mime_type) == ("# hello\n", "text/markdown")
        blob = (await client.read_resource(prefix + "logo.png")).contents
        assert isinstance(blob[0], BlobResourceContents)
        assert blob[0].mime_type == "image/png"
        assert base64.b64decode(blob[0].blob) == (top / "logo.png").read_bytes()
        for bad in [prefix + "missing.md", "file:///etc/passwd", "agentvfs:///workspace/../etc"]:
            with pytest.raises(Exception):  # noqa: B017
                await client.read_resource(bad)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_unknown_tool_is_a_json_rpc_error(server: Server, transport: str) -> None:
    async with connect(transport, server) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("NoSuchTool", {})
        assert refused.value.code == -32602
        assert "NoSuchTool" in refused.value.message and "ApplyPatch" in refused.value.message
        # A tool that exists still answers its failures in-band.
        result = await client.call_tool("Read", {"path": "no/such/file.md"})
        assert result.is_error


async def test_resources_page_to_the_end_from_the_root_of_every_mount(server: Server) -> None:
    # With every grant the listing starts at "/", above the Filesystem mount:
    # each page must resume inside the mount, not start it over (the first
    # page and its cursor used to come back forever).
    many = server.root / "paged"
    many.mkdir(parents=True, exist_ok=True)
    for i in range(600):
        (many / f"f{i:03}.txt").write_text(str(i))
    async with http_client(server.url) as client:
        uris: list[str] = []
        cursor = None
        for _ in range(50):
            page = await client.list_resources(cursor=cursor)
            uris += [r.uri for r in page.resources]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert cursor is None, "resources/list never ended"
        assert len(uris) == len(set(uris))
        assert [u for u in uris if "/workspace/paged/" in u] == [
            f"agentvfs:///workspace/paged/f{i:03}.txt" for i in range(600)
        ]


async def test_resources_page_in_path_order_under_the_grants(secured: Server) -> None:
    many = secured.root / "pub" / "many"
    many.mkdir(parents=True, exist_ok=True)
    for i in range(450):
        (many / f"f{i:03}.txt").write_text(str(i))
    (secured.root / "hidden-from-reader.txt").write_text("no")
    async with http_client(secured.url, headers={"authorization": "Bearer reader-token"}) as reader:
        uris: list[str] = []
        pages = 0
        cursor = None
        while True:
            page = await reader.list_resources(cursor=cursor)
            pages += 1
            uris += [r.uri for r in page.resources]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert pages >= 3
        assert len(uris) == len(set(uris))
        assert all(uri.startswith("agentvfs:///workspace/pub/") for uri in uris), uris[:3]
        assert [u for u in uris if "/many/" in u] == [
            f"agentvfs:///workspace/pub/many/f{i:03}.txt" for i in range(450)
        ]
        with pytest.raises(Exception):  # noqa: B017
            await reader.read_resource("agentvfs:///workspace/hidden-from-reader.txt")
        with pytest.raises(Exception):  # noqa: B017
            await reader.list_resources(cursor="forged")


#: A directory of each tier, as the test server mounts them (conftest.py).
TIERS = {"filesystem": "/workspace", "store": "/memories", "state": "", "object": "/shared"}


@pytest.mark.parametrize("tier", list(TIERS))
async def test_resources_page_to_the_end_on_every_tier(server: Server, tier: str) -> None:
    if tier == "object" and not os.environ.get("AWS_ENDPOINT_URL"):
        pytest.skip("the object tier needs an S3 server: run under scripts/with-s3 (scripts/test does)")
    # One State session for both clients: gRPC writes, MCP lists.
    grpc = GrpcClient(server.address, session="paged")
    top = f"{TIERS[tier]}/paged-{tier}"
    grpc.commit([WriteOp(f"{top}/f{i:03}.txt", str(i)) for i in range(620)])
    async with http_client(server.url, headers={"x-agentvfs-session": "paged"}) as client:
        uris: list[str] = []
        cursor = None
        for _ in range(100):
            page = await client.list_resources(cursor=cursor)
            assert len(page.resources) <= 200
            uris += [r.uri for r in page.resources]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert cursor is None, "resources/list never ended"
        assert len(uris) == len(set(uris)), "a file was listed twice"
        assert [u for u in uris if f"{top}/" in u] == [f"agentvfs://{top}/f{i:03}.txt" for i in range(620)]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_claudes_memory_and_editor_tools_are_served(server: Server, transport: str) -> None:
    """Claude's memory and text-editor tools answer over MCP as over Tools/Invoke
    (docs/tools.md), refusals as isError results."""
    base = f"/workspace/claude-{transport}"
    async with connect(transport, server) as client:
        env = envelope(await client.call_tool("memory", {"command": "create", "path": f"/memories/{transport}.md", "file_text": "tea\n"}))
        assert env["text"] == f"File created successfully at: /memories/{transport}.md", env
        env = envelope(await client.call_tool("memory", {"command": "view", "path": f"/memories/{transport}.md"}))
        assert env["text"] == f"Here's the content of /memories/{transport}.md with line numbers:\n     1\ttea\n     2\t"
        editor = "str_replace_based_edit_tool"
        env = envelope(await client.call_tool(editor, {"command": "create", "path": f"{base}/a.txt", "file_text": "a\n"}))
        assert env["status"] == "success", env
        env = envelope(await client.call_tool(editor, {"command": "insert", "path": f"{base}/a.txt", "insert_line": 1, "insert_text": "b"}))
        assert env["text"].startswith(f"The file {base}/a.txt has been edited."), env
        env = envelope(await client.call_tool(editor, {"command": "str_replace", "path": f"{base}/a.txt", "old_str": "z", "new_str": "y"}))
        assert env["error"]["message"] == f"No replacement was performed, old_str `z` did not appear verbatim in {base}/a.txt."
