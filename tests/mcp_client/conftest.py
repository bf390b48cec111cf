"""Starting the real agentvfs server ($AGENTVFS_BIN) for the MCP tests, and
connecting the official MCP Python SDK to it over either transport."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

PREFIX = "agentvfs listening on "
BIN = os.environ.get("AGENTVFS_BIN", "")

#: Principals of the server with grants: `full` may do everything under
#: /workspace, `reader` may only list and read /workspace/pub.
PRINCIPALS = """
[[principal]]
name = "full"
token = "full-token"
grants = [{ prefix = "/", ops = ["list", "file", "read_binary", "read_file", "read_re", "write", "delete"] }]

[[principal]]
name = "reader"
token = "reader-token"
grants = [{ prefix = "/workspace/pub", ops = ["list", "file", "read_file", "read_re"] }]
"""


def object_mount(name: str) -> str:
    """The object tier at /shared when an S3 server is at hand (scripts/with-s3
    names it in AWS_ENDPOINT_URL; scripts/test runs every suite so), under a
    key prefix of this server's own."""
    if not os.environ.get("AWS_ENDPOINT_URL"):
        return ""
    prefix = "".join(c for c in name if c.isalnum())
    return f"""
[[mount]]
prefix = "/shared"
tier = "object"
bucket = "agentvfs"
key_prefix = "mcp-{prefix}/"
path_style = true
"""


class Server:
    """A running `agentvfs serve` on an ephemeral loopback port, its
    /workspace mount on a fresh directory."""

    def __init__(self, extra_config: str = "") -> None:
        if not BIN:
            raise RuntimeError("AGENTVFS_BIN must name the agentvfs binary (scripts/test-mcp sets it)")
        self._tmp = tempfile.TemporaryDirectory()
        base = Path(self._tmp.name)
        self.root = base / "root"
        self.root.mkdir()
        self.config = base / "agentvfs.toml"
        self.config.write_text(
            f"""listen = "127.0.0.1:0"
{extra_config}
[[mount]]
prefix = "/"
tier = "state"

[[mount]]
prefix = "/workspace"
tier = "filesystem"
root = "{self.root}"

[[mount]]
prefix = "/memories"
tier = "store"
path = "{base / 'store'}"
{object_mount(base.name)}"""
        )
        self.log = base / "server.log"
        with self.log.open("wb") as log:
            # Its journal and indexes stay in this server's directory.
            env = {**os.environ, "XDG_DATA_HOME": str(base / "data")}
            self._proc = subprocess.Popen(
                [BIN, "serve", "--config", str(self.config)],
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
            )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().decode().strip()
        if not line.startswith(PREFIX):
            log = self.log.read_text()
            self.stop()
            raise RuntimeError(f"server did not start: {log}")
        self.address = line.removeprefix(PREFIX)
        self.url = f"http://{self.address}/mcp"

    def stop(self) -> None:
        self._proc.kill()
        self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._tmp.cleanup()


@pytest.fixture(scope="session")
def start_server() -> Iterator[Callable[[str], Server]]:
    """Starts servers on demand (one per configuration) for the whole session."""
    servers: dict[str, Server] = {}

    def start(extra_config: str = "") -> Server:
        if extra_config not in servers:
            servers[extra_config] = Server(extra_config)
        return servers[extra_config]

    yield start
    for server in servers.values():
        server.stop()


@pytest.fixture(scope="session")
def server(start_server: Callable[[str], Server]) -> Server:
    """The anonymous server (every grant, no token)."""
    return start_server("")


@pytest.fixture(scope="session")
def secured(start_server: Callable[[str], Server]) -> Server:
    """A server with principals: a token is required."""
    return start_server(PRINCIPALS)


@asynccontextmanager
async def http_client(
    url: str, *, headers: dict[str, str] | None = None, mode: str = "auto", **options: Any
) -> AsyncIterator[Client]:
    """An MCP client over streamable HTTP sending `headers` with every request;
    `options` are the SDK Client's own (message_handler, logging_callback, ...)."""
    transport = streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers or {}))
    async with Client(transport, mode=mode, **options) as client:  # type: ignore[arg-type]
        yield client


@asynccontextmanager
async def stdio_client(config: Path, *, token: str | None = None, **options: Any) -> AsyncIterator[Client]:
    """An MCP client over stdio to `agentvfs mcp --config config [--token token]`
    (the token after the verb, as `mcp --help` shows it); `options` are the
    SDK Client's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTVFS_")}
    args = ["mcp", "--config", str(config)] + (["--token", token] if token else [])
    params = StdioServerParameters(command=BIN, args=args, env=env)
    async with Client(params, **options) as client:
        yield client


#: The transports every tool test runs over: HTTP on the current protocol
#: (stateless), HTTP on a protocol version with sessions, and stdio.
TRANSPORTS = ["http", "http-legacy", "stdio"]


@asynccontextmanager
async def connect(transport: str, server: Server, **options: Any) -> AsyncIterator[Client]:
    """A client of `server` over `transport` (see TRANSPORTS), with the SDK
    Client's `options`."""
    if transport == "stdio":
        # The stdio server opens the same tiers in its own process: give it
        # its own Store directory (RocksDB allows one process per database).
        config = server.config.with_name(f"stdio-{os.getpid()}.toml")
        config.write_text(server.config.read_text().replace("/store", "/store-stdio"))
        async with stdio_client(config, **options) as client:
            yield client
    else:
        options.setdefault("mode", "legacy" if transport == "http-legacy" else "auto")
        async with http_client(server.url, **options) as client:
            yield client


def pytest_report_header() -> str:
    return f"agentvfs binary: {BIN}; python {sys.version.split()[0]}"
