"""Resource subscriptions, path completion and logging through the official
MCP Python SDK (docs/mcp.md § Subscriptions, § Completion, § Logging):
writes made over gRPC reach a subscribed MCP client within 100 ms, on both
protocols (resources/subscribe with sessions, subscriptions/listen on the
stateless one), and nothing crosses a grant."""

from __future__ import annotations

import statistics
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import mcp_types as types
import pytest
from agentvfs import Client as GrpcClient
from mcp import Client
from mcp.client.subscriptions import ResourcesListChanged, ResourceUpdated, SubscriptionLost
from mcp.shared.exceptions import MCPError

from conftest import Server, connect, http_client

#: A notification must arrive this soon after the write that caused it.
DEADLINE = 0.1

#: resources/subscribe and logging are the session protocols' (deprecated by 2026-07-28).
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


class Inbox:
    """The notifications a client received, each with when it arrived."""

    def __init__(self) -> None:
        self.send, self.receive = anyio.create_memory_object_stream[tuple[float, object]](1000)

    async def handler(self, message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            await self.send.send((time.monotonic(), ResourceUpdated(message.params.uri)))
        elif isinstance(message, types.ResourceListChangedNotification):
            await self.send.send((time.monotonic(), ResourcesListChanged()))

    async def next(self, timeout: float = 2.0) -> tuple[float, object]:
        with anyio.fail_after(timeout):
            return await self.receive.receive()

    async def quiet(self, seconds: float = 0.3) -> list[object]:
        """What else arrives within `seconds`."""
        extra = []
        with anyio.move_on_after(seconds):
            while True:
                extra.append((await self.receive.receive())[1])
        return extra


@asynccontextmanager
async def subscriber(server: Server, token: str | None = None) -> AsyncIterator[tuple[Client, Inbox]]:
    """A client on a protocol version with sessions, collecting notifications."""
    inbox = Inbox()
    headers = {"authorization": f"Bearer {token}"} if token else None
    async with http_client(server.url, headers=headers, mode="legacy", message_handler=inbox.handler) as client:
        yield client, inbox


async def write(grpc: GrpcClient, path: str, data: bytes) -> float:
    """Writes `data` at `path` over gRPC (in a thread, so the event loop keeps
    receiving); when the write started."""
    started = time.monotonic()
    await anyio.to_thread.run_sync(grpc.upload, path, data)
    return started


def uri(path: str) -> str:
    return "agentvfs://" + path


@pytest.mark.parametrize("mount", ["workspace", "memories"])
async def test_a_subscription_notifies_within_100ms_of_a_grpc_write(server: Server, mount: str) -> None:
    grpc = GrpcClient(server.address)
    path = f"/{mount}/sub/watched.txt"
    other = f"/{mount}/sub/other.txt"
    for p in (path, other):
        grpc.upload(p, b"v0")
    async with subscriber(server) as (client, inbox):
        caps = client.server_capabilities.resources
        assert caps is not None and caps.subscribe and caps.list_changed
        await client.subscribe_resource(uri(path))
        latencies = []
        for i in range(10):
            await write(grpc, other, f"o{i}".encode())  # not subscribed: no notice
            started = await write(grpc, path, f"v{i + 1}".encode())
            at, event = await inbox.next()
            assert event == ResourceUpdated(uri(path))
            latencies.append(at - started)
        print(f"\n{mount}: write→notification median {statistics.median(latencies) * 1000:.1f} ms, "
              f"max {max(latencies) * 1000:.1f} ms")
        assert max(latencies) < DEADLINE, latencies
        # A file appearing under the listing changes the list.
        await write(grpc, f"/{mount}/sub/new.txt", b"new")
        assert (await inbox.next())[1] == ResourcesListChanged()
        # Unsubscribed, the file's writes say nothing more.
        await client.unsubscribe_resource(uri(path))
        await write(grpc, path, b"after")
        assert await inbox.quiet() == []


async def test_no_notification_crosses_a_grant(secured: Server) -> None:
    full = GrpcClient(secured.address, token="full-token")
    shown, hidden = "/workspace/pub/shown.txt", "/workspace/secret.txt"
    for p in (shown, hidden):
        full.upload(p, b"v0")
    async with subscriber(secured, "reader-token") as (reader, seen), subscriber(secured, "full-token") as (
        owner,
        owner_seen,
    ):
        # A file outside the reader's grants cannot be subscribed to at all.
        with pytest.raises(MCPError) as refused:
            await reader.subscribe_resource(uri(hidden))
        assert "permission denied" in refused.value.message
        await reader.subscribe_resource(uri(shown))
        await owner.subscribe_resource(uri(hidden))
        # Changes outside the grant: a write and a new file (no list_changed).
        await write(full, hidden, b"v1")
        await write(full, "/workspace/secret-new.txt", b"x")
        await write(full, shown, b"v1")
        assert (await seen.next())[1] == ResourceUpdated(uri(shown))
        assert await seen.quiet() == []
        # The principal that may see them is told (so the test can fail).
        assert (await owner_seen.next())[1] == ResourceUpdated(uri(hidden))
        assert (await owner_seen.next())[1] == ResourcesListChanged()


async def test_subscriptions_are_bounded_per_session(start_server) -> None:  # type: ignore[no-untyped-def]
    bounded = start_server("[mcp]\nmax_subscriptions_per_session = 2\n")
    async with subscriber(bounded) as (client, _):
        await client.subscribe_resource(uri("/workspace/a"))
        await client.subscribe_resource(uri("/workspace/b"))
        await client.subscribe_resource(uri("/workspace/a"))  # again: no new one
        with pytest.raises(MCPError) as refused:
            await client.subscribe_resource(uri("/workspace/c"))
        assert "max_subscriptions_per_session" in refused.value.message
        await client.unsubscribe_resource(uri("/workspace/a"))
        await client.subscribe_resource(uri("/workspace/c"))
        with pytest.raises(MCPError) as bad:
            await client.subscribe_resource("agentvfs://host/x")
        assert "must be absolute" in bad.value.message


async def test_listen_notifies_on_the_stateless_protocol(secured: Server) -> None:
    full = GrpcClient(secured.address, token="full-token")
    shown, hidden = "/workspace/pub/listened.txt", "/workspace/listened-secret.txt"
    for p in (shown, hidden):
        full.upload(p, b"v0")
    headers = {"authorization": "Bearer reader-token"}
    async with http_client(secured.url, headers=headers) as reader:
        assert reader.protocol_version >= "2026-07-28"
        # Acknowledged first (the SDK's order), then ended by the grant's error.
        with pytest.raises(SubscriptionLost) as lost:
            async with reader.listen(resource_subscriptions=[uri(hidden)]) as sub:
                await anext(aiter(sub))
        assert isinstance(lost.value.__cause__, MCPError)
        assert "permission denied" in lost.value.__cause__.message
        async with reader.listen(resource_subscriptions=[uri(shown)], resources_list_changed=True) as sub:
            events = aiter(sub)
            # The feed starts as the acknowledgment is sent: a moment later
            # every write is seen.
            await anyio.sleep(0.05)
            latencies = []
            for i in range(5):
                await write(full, hidden, f"h{i}".encode())
                started = await write(full, shown, f"v{i}".encode())
                with anyio.fail_after(2):
                    event = await anext(events)
                latencies.append(time.monotonic() - started)
                assert event == ResourceUpdated(uri(shown))
            print(f"\nlisten: write→event median {statistics.median(latencies) * 1000:.1f} ms, "
                  f"max {max(latencies) * 1000:.1f} ms")
            assert max(latencies) < DEADLINE, latencies
            await write(full, "/workspace/pub/appeared.txt", b"x")
            with anyio.fail_after(2):
                assert await anext(events) == ResourcesListChanged()


async def test_completion_lists_granted_paths_only_in_path_order(secured: Server) -> None:
    full = GrpcClient(secured.address, token="full-token")
    for name in ["b.md", "a.md", "a-dir/x.txt", "c.md"]:
        full.upload(f"/workspace/pub/comp/{name}", b"x")
    full.upload("/workspace/comp-secret.txt", b"x")
    for i in range(150):
        full.upload(f"/workspace/pub/comp/many/f{i:03}.txt", b"x")
    ref = types.ResourceTemplateReference(type="ref/resource", uri="agentvfs://{+path}")

    async def complete(client: Client, value: str) -> types.Completion:
        return (await client.complete(ref, {"name": "path", "value": value})).completion

    async with http_client(secured.url, headers={"authorization": "Bearer reader-token"}) as reader:
        assert (await complete(reader, "/workspace/")).values == ["/workspace/pub/"]
        assert (await complete(reader, "/workspace/comp")).values == []
        done = await complete(reader, "/workspace/pub/comp/")
        assert done.values == [
            "/workspace/pub/comp/a-dir/",
            "/workspace/pub/comp/a.md",
            "/workspace/pub/comp/b.md",
            "/workspace/pub/comp/c.md",
            "/workspace/pub/comp/many/",
        ]
        assert (await complete(reader, "/workspace/pub/comp/a")).values[:2] == [
            "/workspace/pub/comp/a-dir/",
            "/workspace/pub/comp/a.md",
        ]
        many = await complete(reader, "/workspace/pub/comp/many/f")
        assert many.values == [f"/workspace/pub/comp/many/f{i:03}.txt" for i in range(100)]
        assert (many.total, many.has_more) == (150, True)
        assert (await complete(reader, "/nowhere/x")).values == []
        with pytest.raises(MCPError) as bad:
            await reader.complete(types.ResourceTemplateReference(type="ref/resource", uri="file://{x}"),
                                  {"name": "x", "value": ""})
        assert "the one template is agentvfs://{+path}" in bad.value.message
    async with http_client(secured.url, headers={"authorization": "Bearer full-token"}) as owner:
        assert "/workspace/comp-secret.txt" in (await complete(owner, "/workspace/comp")).values


async def test_logging_level_filters_messages(server: Server) -> None:
    logged: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)

    async with http_client(server.url, mode="legacy", logging_callback=on_log) as client:
        assert client.server_capabilities.logging is not None
        await client.set_logging_level("debug")
        await client.subscribe_resource("test://not-ours")
        await anyio.sleep(0.2)
        assert [(m.level, m.logger) for m in logged] == [("warning", "agentvfs")]
        assert "not an agentvfs:// URI" in str(logged[0].data)
        await client.set_logging_level("error")
        await client.subscribe_resource("test://not-ours-either")
        await anyio.sleep(0.2)
        assert len(logged) == 1


@pytest.mark.parametrize("transport", ["http-legacy", "stdio"])
async def test_a_session_is_notified_of_changes_made_through_mcp(server: Server, transport: str) -> None:
    # Both session transports: the notification reaches the session's own
    # channel (stdout, or the GET event stream), whoever wrote.
    inbox = Inbox()
    watched = f"/workspace/own-{transport}/w.md"
    async with connect(transport, server, mode="legacy", message_handler=inbox.handler) as client:
        await client.subscribe_resource(uri(watched))
        await client.call_tool("Write", {"path": watched.lstrip("/"), "content": "1"})
        assert (await inbox.next())[1] == ResourceUpdated(uri(watched))
        assert (await inbox.next())[1] == ResourcesListChanged()
        read = await client.call_tool("Read", {"path": watched.lstrip("/")})
        version = read.structured_content["stats"]["version"]  # type: ignore[index]
        edit = {"path": watched.lstrip("/"), "old_string": "1", "new_string": "2", "expected_version": version}
        edited = await client.call_tool("Edit", edit)
        assert not edited.is_error, edited.structured_content
        assert (await inbox.next())[1] == ResourceUpdated(uri(watched))
        assert await inbox.quiet() == []


async def test_subscriptions_are_bounded_per_principal_over_its_sessions(start_server) -> None:  # type: ignore[no-untyped-def]
    bounded = start_server("[mcp]\nmax_subscriptions_per_principal = 3\n")
    async with subscriber(bounded) as (one, _):
        async with subscriber(bounded) as (two, _):
            await one.subscribe_resource(uri("/workspace/p1"))
            await one.subscribe_resource(uri("/workspace/p2"))
            await two.subscribe_resource(uri("/workspace/p3"))
            with pytest.raises(MCPError) as refused:
                await two.subscribe_resource(uri("/workspace/p4"))
            assert "max_subscriptions_per_principal" in refused.value.message
        # A session that ends gives its subscriptions back.
        for _ in range(50):
            try:
                await one.subscribe_resource(uri("/workspace/p4"))
                break
            except MCPError:
                await anyio.sleep(0.05)
        else:
            pytest.fail("the closed session's subscription was never given back")
