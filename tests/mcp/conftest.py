"""Real MCP servers for the tests: the demo server over stdio and over streamable HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from roboz.mcp import MCPServer

DEMO = str(Path(__file__).with_name("demo_server.py"))


class Recorder:
    """The calls that reached the demo server, from the file it appends to."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def calls(self) -> list[str]:
        return self.path.read_text().split() if self.path.exists() else []


def stdio_demo(record: Path, **options: object) -> MCPServer:
    return MCPServer.stdio(
        sys.executable,
        [DEMO],
        name="demo",
        env={"DEMO_RECORD": str(record)},
        stderr=subprocess.DEVNULL,
        **options,  # type: ignore[arg-type]
    )


@pytest.fixture
def recorder(tmp_path: Path) -> Recorder:
    return Recorder(tmp_path / "calls.txt")


@pytest.fixture
def demo(recorder: Recorder) -> Iterator[MCPServer]:
    server = stdio_demo(recorder.path)
    try:
        yield server
    finally:
        server.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def http_demo(recorder: Recorder) -> Iterator[str]:
    """The demo server over streamable HTTP on 127.0.0.1; yields its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, DEMO, "--http", str(port)],
        env={**os.environ, "DEMO_RECORD": str(recorder.path)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the HTTP demo server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)
