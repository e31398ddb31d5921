"""`roboz mcp serve` and text that is not UTF-8: a lone surrogate in a tool's arguments is
refused with the server's "invalid input" reply, while a file whose name is not UTF-8 is
listed in an escaped form and reached through a glob.

Over stdio the SDK's transport already drops a lone surrogate escape as invalid JSON; the
server's own check covers every other way arguments reach its tools (in-process calls,
other transports). The SDK's client cannot even send a lone surrogate (it fails to
serialize it), so the process tests speak JSON-RPC to the real server by hand.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.types import CallToolResult

from roboz.mcp.serve import build_server
from roboz.shed.models import PermissionRule
from roboz.shed.sandbox import PermissionPolicy


class RawClient:
    """Newline-delimited JSON-RPC over the server's stdio, one request at a time."""

    def __init__(self, policy: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "roboz.cli", "mcp", "serve", "--policy", str(policy)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.next_id = 0
        self.request(
            "initialize",
            '{"protocolVersion": "2025-06-18", "capabilities": {}, '
            '"clientInfo": {"name": "raw", "version": "1"}}',
        )
        self.send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    def send(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text.encode("ascii") + b"\n")
        self.process.stdin.flush()

    def request(self, method: str, params_json: str) -> dict[str, Any]:
        """``params_json`` is raw JSON text, so it can hold escapes such as ``\\ud800``."""
        self.next_id += 1
        self.send(
            f'{{"jsonrpc": "2.0", "id": {self.next_id}, "method": "{method}", '
            f'"params": {params_json}}}'
        )
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            assert line, "the server closed its output"
            message = json.loads(line)
            if message.get("id") == self.next_id:
                return dict(message)

    def call(self, tool: str, arguments_json: str) -> str:
        reply = self.request("tools/call", f'{{"name": "{tool}", "arguments": {arguments_json}}}')
        assert "result" in reply, reply
        return " ".join(part.get("text", "") for part in reply["result"]["content"])

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[RawClient]:
    work = tmp_path / "work"
    (work / "notes").mkdir(parents=True)
    (work / "notes" / "a.txt").write_text("alpha\n")
    with open(os.fsencode(work) + b"/notes/caf\xe9.txt", "wb") as handle:
        handle.write(b"latin-1 name\n")
    policy = tmp_path / "policy.toml"
    policy.write_text(f'base = "{work}"\ndefault = "deny"\n[[allow]]\npattern = "**"\n')
    raw = RawClient(policy)
    yield raw
    raw.close()


def test_lone_surrogates_in_arguments_are_refused_as_invalid_input(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "notes").mkdir(parents=True)
    server = build_server(PermissionPolicy(base=work, allow=(PermissionRule(pattern="**"),)))

    async def call(tool: str, arguments: dict[str, Any]) -> str:
        result = await server.call_tool(tool, arguments)
        # The tools answer with a CallToolResult; a refusal is marked isError.
        assert isinstance(result, CallToolResult) and result.isError, result
        return " ".join(getattr(block, "text", "") for block in result.content)

    calls: list[tuple[str, dict[str, Any], str]] = [
        ("run_file_command", {"value": [["cat", "CMD"], ["notes/\ud800", "PTH"]]}, "value[1][0]"),
        (
            "run_file_command",
            {"value": [["grep", "CMD"], ["\udafd", "ARG"], ["notes", "PTH"]]},
            "value[1][0]",
        ),
        ("apply_patch", {"path": "notes/\ud800", "old_string": "", "new_string": "x"}, "path"),
        ("apply_patch", {"path": "n.txt", "old_string": "", "new_string": "\udcff"}, "new_string"),
        ("process_pdf", {"path": "\udcff.pdf"}, "path"),
    ]
    for tool, arguments, where in calls:
        reply = anyio.run(call, tool, arguments)
        assert reply.startswith(
            f"{tool}: invalid input: {where} contains text that cannot be encoded as UTF-8"
        ), reply
        assert "nothing ran" in reply
    assert sorted(os.listdir(work)) == ["notes"] and os.listdir(work / "notes") == []


def test_a_lone_surrogate_on_the_wire_leaves_the_server_serving(client: RawClient) -> None:
    # Dropped by the transport as invalid JSON (no reply to it); the next call is served.
    client.send(
        '{"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": '
        '"run_file_command", "arguments": {"value": [["cat", "CMD"], ["notes/\\ud800", "PTH"]]}}}'
    )
    assert "alpha" in client.call(
        "run_file_command", '{"value": [["cat", "CMD"], ["notes/a.txt", "PTH"]]}'
    )


def test_a_name_that_is_not_utf8_is_shown_escaped_and_reached_by_a_glob(
    client: RawClient,
) -> None:
    listing = client.call("run_file_command", '{"value": [["ls", "CMD"], ["notes", "PTH"]]}')
    assert "caf\\xe9.txt" in listing, listing
    read = client.call("run_file_command", '{"value": [["cat", "CMD"], ["notes/caf*.txt", "PTH"]]}')
    assert "latin-1 name" in read, read
    assert "$ cat notes/caf\\xe9.txt" in read or "caf*.txt" in read
