"""The trace of an agent step that runs a script leads to the helper's log line for that run.

The client sends the W3C trace id of the span in force with the request; the helper, which
never imports OpenTelemetry, logs it as a field of the run's line. Without a span nothing is
sent, and a malformed id is a protocol error, never logged raw.
"""

from __future__ import annotations

import socket
import uuid

import msgspec
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from roboz_helper import protocol

from roboz import Agent
from roboz.agent import AgentMode
from roboz.llm import MockLLMEndpoint
from roboz.shed.safe_scripts import SafeScriptsClient
from roboz.shed.safe_scripts.tool import get_run_shell_script
from roboz.tools import stop
from roboz.tracing import instrument
from tests.shed.safe_scripts.conftest import Helper


def _run_lines(helper: Helper, marker: str) -> list[str]:
    return [
        line
        for line in helper.log_path.read_text(errors="replace").splitlines()
        if " run " in line and marker in line
    ]


def test_the_tool_span_trace_id_is_in_the_helpers_run_line(helper: Helper) -> None:
    marker = f"traced-{uuid.uuid4().hex}"
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = Agent(
        "tracer",
        agent_endpoint=MockLLMEndpoint(
            [
                {"action": "run_shell_script", "script": "greet.sh", "args": [marker]},
                {"action": "stop", "value": "done"},
            ]
        ),
        tools=[get_run_shell_script(helper.socket_path), stop],
        mode=AgentMode.AUTONOMOUS,
    )
    instrument(agent, tracer_provider=provider)
    agent.invoke()
    provider.shutdown()
    [tool_span] = [s for s in exporter.get_finished_spans() if s.name.endswith("run_shell_script")]
    assert tool_span.context is not None
    trace_id = format(tool_span.context.trace_id, "032x")
    [line] = _run_lines(helper, marker)
    assert f"trace_id={trace_id}" in line


def test_without_a_span_no_trace_id_is_sent(helper: Helper) -> None:
    marker = f"untraced-{uuid.uuid4().hex}"
    result = SafeScriptsClient(helper.socket_path).run_script("greet.sh", [marker])
    assert result.exit_code == 0
    [line] = _run_lines(helper, marker)
    assert "trace_id=" not in line


@pytest.mark.parametrize("bad", ["x" * 32, "0" * 31, "ABCDEF" + "0" * 26, "0" * 32 + "\n"])
def test_a_malformed_trace_id_is_refused_and_never_logged(helper: Helper, bad: str) -> None:
    frame = msgspec.msgpack.encode(
        {"type": "run_script", "path": "greet.sh", "args": [], "trace_id": bad}
    )
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(10)
        conn.connect(helper.socket_path)
        reader = conn.makefile("rb")
        header = reader.read(protocol.HEADER.size)
        reader.read(protocol.parse_length(header))  # the greeting
        conn.sendall(protocol.HEADER.pack(len(frame)) + frame)
        header = reader.read(protocol.HEADER.size)
        reply = protocol.decode_response(reader.read(protocol.parse_length(header)))
    assert isinstance(reply, protocol.ProtocolError)
    assert bad not in helper.log_path.read_text(errors="replace")
