"""Starting the real agentvfs server ($AGENTVFS_BIN) for the tests."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

PREFIX = "agentvfs listening on "


class Server:
    """A running `agentvfs serve`, on an ephemeral loopback port unless
    `listen` names one, in a temporary working directory unless `workdir`
    names one (where a relative Store `path` lies)."""

    def __init__(self, config: str | None, *, listen: str = "127.0.0.1:0", workdir: str | None = None) -> None:
        bin_path = os.environ.get("AGENTVFS_BIN")
        if not bin_path:
            raise RuntimeError("AGENTVFS_BIN must name the agentvfs binary (scripts/test-python sets it)")
        self._dir = tempfile.TemporaryDirectory()
        self._data = tempfile.TemporaryDirectory()
        args = [bin_path, "serve", "--listen", listen]
        if config:
            path = Path(self._dir.name) / "agentvfs.toml"
            path.write_text(config)
            args += ["--config", str(path)]
        self.log = Path(self._dir.name) / "server.log"
        with self.log.open("wb") as log:
            # The default Store data directory is the user's; each test server keeps its
            # own, outside the working directory it serves at /workspace.
            env = {**os.environ, "XDG_DATA_HOME": self._data.name}
            cwd = workdir or self._dir.name
            self._proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=log)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().decode().strip()
        if not line.startswith(PREFIX):
            self.stop()
            raise RuntimeError(f"server did not start: {line!r}")
        self.address = line.removeprefix(PREFIX)

    def stop(self) -> None:
        self._proc.kill()
        self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._dir.cleanup()
        self._data.cleanup()


@pytest.fixture(scope="session")
def start_server() -> Iterator[Callable[[str | None], Server]]:
    """Starts servers on demand (one per configuration) for the whole session."""
    servers: dict[str | None, Server] = {}

    def start(config: str | None = None) -> Server:
        if config not in servers:
            servers[config] = Server(config)
        return servers[config]

    yield start
    for server in servers.values():
        server.stop()


@pytest.fixture(scope="session")
def server(start_server: Callable[[str | None], Server]) -> Server:
    """A server on the embedded default configuration."""
    return start_server(None)
