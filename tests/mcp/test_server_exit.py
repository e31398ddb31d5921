"""A stdio server that exits while a child of it still holds its stdout: the client sees no
EOF, so it must notice the exit itself. The call in flight fails with MCPConnectionError naming
server and tool, and the next call reconnects (to a fresh server process)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from roboz.mcp import MCPConnectionError, MCPServer
from tests.procfs import gone, stat

from .conftest import DEMO, Recorder

# Generous: the fix reports the exit within a second; a client that waits for EOF waits out
# the whole call timeout and fails with MCPTimeout instead, which the test then sees.
CALL_TIMEOUT_S = 20.0


def test_a_server_that_exits_leaving_a_child_on_its_stdout_is_noticed(
    tmp_path: Path, recorder: Recorder
) -> None:
    child_pid_file = tmp_path / "child.pid"
    server = MCPServer.stdio(
        sys.executable,
        [DEMO],
        name="demo",
        env={"DEMO_RECORD": str(recorder.path), "DEMO_CHILD_PID": str(child_pid_file)},
        stderr=subprocess.DEVNULL,
        timeout=CALL_TIMEOUT_S,
    )
    try:
        assert server.call_tool("echo", {"text": "before"}).content[0].text == "before"  # type: ignore[union-attr]
        first_pid = server.pid
        with pytest.raises(MCPConnectionError) as info:
            server.call_tool("die_leaving_child", {})
        message = str(info.value)
        assert "'demo'" in message and "'die_leaving_child'" in message, message
        child = int(child_pid_file.read_text())
        # The next call reconnects to a new server process, and the old one's leftover child,
        # in the old server's process group, is ended with it.
        result = server.call_tool("echo", {"text": "after"})
        assert result.content[0].text == "after"  # type: ignore[union-attr]
        assert server.reconnects == 1 and server.pid not in (None, first_pid)
        assert gone(child), stat(child)
        assert recorder.calls() == ["echo", "die_leaving_child", "echo"]
    finally:
        server.close()
