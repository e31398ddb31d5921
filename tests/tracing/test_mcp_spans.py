"""An MCP tool denied by its rule shows up as a denied tool span, with the rule as reason."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from roboz.agent import Agent
from roboz.llm import MockLLMEndpoint
from roboz.tools import stop
from roboz.tracing import instrument
from tests.mcp.conftest import stdio_demo


def test_denied_and_allowed_mcp_calls(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with stdio_demo(tmp_path / "calls.txt") as server:
        tools = server.tools(include=["echo", "delete_all"], rules={"delete_*": "deny"})
        agent = Agent(
            "mcp",
            agent_endpoint=MockLLMEndpoint(
                [
                    {"action": "delete_all", "rationale": "x"},
                    {"action": "echo", "rationale": "x", "text": "hi"},
                    {"action": "stop", "rationale": "x", "value": ""},
                ]
            ),
            tools=[*tools, stop],
        )
        instrument(agent, tracer_provider=provider)
        agent.invoke()
    spans = {span.name: span for span in exporter.get_finished_spans()}
    denied = spans["execute_tool delete_all"].attributes or {}
    assert denied["roboz.tool.status"] == "denied"
    assert denied["roboz.tool.denial_reason"] == "denied by rule 'delete_*'"
    assert (spans["execute_tool echo"].attributes or {})["roboz.tool.status"] == "ok"
    provider.shutdown()
