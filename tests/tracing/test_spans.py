"""Spans from agent runs, checked with the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from roboz.agent import Agent, AgentMode, AgentRunError
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Int, Message, Stop, Str
from roboz.runtime.events import EventPipe
from roboz.shed.models import Operation, PermissionRule
from roboz.shed.safe_scripts.tool import ShellScriptOutcome
from roboz.shed.sandbox import PermissionPolicy
from roboz.shed.tools import FilesystemContext, get_run_file_command
from roboz.tools import stop, tool
from roboz.tracing import OTelSink, instrument

SECRETS = ("SECRET-SYSTEM", "SECRET-USER", "SECRET-RATIONALE", "SECRET-ARG", "SECRET-RESULT")


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


def named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def one(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    [span] = named(spans, name)
    return span


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


@tool
def greet(input: Str, messages: list[Message]) -> Str:
    """Greet someone."""
    return Str(value=f"hello {input.value} SECRET-RESULT")


def llm_agent(replies: list[object]) -> Agent:
    return Agent(
        "greeter",
        "SECRET-SYSTEM: be nice.",
        agent_endpoint=MockLLMEndpoint(replies),  # type: ignore[arg-type]
        tools=[greet, stop],
        mode=AgentMode.AUTONOMOUS,
        initial_messages=["SECRET-USER says hi"],
    )


REPLIES = [
    {"action": "greet", "rationale": "SECRET-RATIONALE", "value": "SECRET-ARG"},
    {"action": "stop", "rationale": "done", "value": "bye"},
]


def test_run_step_llm_and_tool_spans_nest(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = llm_agent(REPLIES)
    instrument(agent, tracer_provider=provider)
    agent.invoke()
    spans = exporter.get_finished_spans()
    run = one(spans, "invoke_agent greeter")
    steps = named(spans, "step 1") + named(spans, "step 2")
    prompts = named(spans, "execute_tool prompt_llm")
    chats = named(spans, "chat mock")
    greet_span = one(spans, "execute_tool greet")
    assert len({span.context.trace_id for span in spans if span.context}) == 1
    assert run.attributes is not None and run.attributes["gen_ai.agent.name"] == "greeter"
    assert run.attributes["roboz.agent.llm_calls"] == 2
    assert run.status.status_code is StatusCode.UNSET  # success is left unset, as OTel asks
    assert [parent_of(step) for step in steps] == [span_id(run)] * 2
    assert [parent_of(p) for p in prompts] == [span_id(s) for s in steps]
    assert [parent_of(c) for c in chats] == [span_id(p) for p in prompts]
    assert parent_of(greet_span) == span_id(steps[0])
    assert greet_span.attributes is not None
    assert greet_span.attributes["roboz.tool.trigger"] == "invoked"
    assert greet_span.attributes["roboz.tool.status"] == "ok"
    chat = chats[0].attributes
    assert chat is not None
    assert chat["gen_ai.operation.name"] == "chat"
    assert chat["gen_ai.system"] == "mock" and chat["gen_ai.request.model"] == "mock"
    assert int(chat["gen_ai.usage.input_tokens"]) > 0  # type: ignore[arg-type]
    assert int(chat["gen_ai.usage.output_tokens"]) > 0  # type: ignore[arg-type]


def _every_text(spans: tuple[ReadableSpan, ...]) -> str:
    parts = []
    for span in spans:
        parts.append(span.name)
        parts.append(span.status.description or "")
        parts.extend(str(v) for v in (span.attributes or {}).values())
        for event in span.events:
            parts.append(event.name)
            parts.extend(str(v) for v in (event.attributes or {}).values())
    return "\n".join(parts)


def test_no_prompt_or_completion_text_by_default(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = llm_agent(["not json", *REPLIES])
    instrument(agent, tracer_provider=provider)
    agent.invoke()
    text = _every_text(exporter.get_finished_spans())
    for secret in SECRETS:
        assert secret not in text
    assert "not json" not in text


def test_content_only_when_opted_in(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = llm_agent(REPLIES)
    instrument(agent, tracer_provider=provider, capture_content=True)
    agent.invoke()
    assert "SECRET-RATIONALE" in _every_text(exporter.get_finished_spans())


def test_a_rejected_reply_is_its_own_llm_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = llm_agent(["not json", *REPLIES])
    instrument(agent, tracer_provider=provider)
    agent.invoke()
    chats = named(exporter.get_finished_spans(), "chat mock")
    assert len(chats) == 3
    assert chats[0].attributes is not None
    assert chats[0].attributes["roboz.llm.reply_rejected"] is True
    assert "gen_ai.usage.output_tokens" in (chats[1].attributes or {})


def test_chained_tools_and_failures(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    @tool
    def begin(input: Empty, messages: list[Message]) -> Int:
        """Begin."""
        return Int(value=1)

    @tool(chained_to=begin)
    def explode(input: Int, messages: list[Message]) -> Stop:
        """Fail with something that must not be exported."""
        raise ValueError("SECRET-RESULT in an error")

    agent = Agent("broken", mode=AgentMode.DETERMINISTIC, default_tools=[begin], tools=[explode])
    instrument(agent, tracer_provider=provider)
    with pytest.raises(AgentRunError):
        agent.invoke()
    spans = exporter.get_finished_spans()
    run, failed = one(spans, "invoke_agent broken"), one(spans, "execute_tool explode")
    assert run.status.status_code is StatusCode.ERROR
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes is not None and failed.attributes["roboz.tool.trigger"] == "chained"
    assert one(spans, "execute_tool begin").attributes["roboz.tool.trigger"] == "default"  # type: ignore[index]
    assert "SECRET-RESULT" not in _every_text(spans)
    assert len(spans) == 4  # run, step, begin, explode: every span ended


def test_a_denied_file_command_records_the_reason(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    (tmp_path / "inside").mkdir()
    policy = PermissionPolicy(
        base=tmp_path / "inside",
        allow=(
            PermissionRule(pattern="**", operations=frozenset({Operation.READ, Operation.CREATE})),
        ),
    )
    pipe = EventPipe()
    file_tools = get_run_file_command(FilesystemContext(permissions=policy, pipe=pipe))
    agent = Agent(
        "files",
        agent_endpoint=MockLLMEndpoint(
            [
                {
                    "action": "run_file_command",
                    "rationale": "x",
                    "value": [["rm", "CMD"], ["../elsewhere", "PTH"]],
                },
                {"action": "stop", "rationale": "done", "value": ""},
            ]
        ),
        tools=[*file_tools, stop],
        mode=AgentMode.AUTONOMOUS,
        event_pipe=pipe,
    )
    instrument(agent, tracer_provider=provider)
    agent.invoke()
    executed = one(exporter.get_finished_spans(), "execute_tool execute_file_command")
    assert executed.attributes is not None
    assert executed.attributes["roboz.tool.status"] == "denied"
    assert executed.attributes["roboz.tool.denial_reason"] == "denied by policy"
    assert executed.attributes["roboz.tool.trigger"] == "chained"
    assert "elsewhere" not in _every_text(exporter.get_finished_spans())


def test_helper_runs_get_a_span(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    @tool
    def run_shell_script(input: Empty, messages: list[Message]) -> ShellScriptOutcome:
        """Pretend the helper timed the script out."""
        return ShellScriptOutcome(
            value="...", script="build.sh", status="timeout", exit_status=137, limit="timeout"
        )

    @tool(chained_to=run_shell_script)
    def finish(input: Str, messages: list[Message]) -> Stop:
        """End."""
        return Stop()

    agent = Agent(
        "scripts",
        mode=AgentMode.DETERMINISTIC,
        default_tools=[run_shell_script],
        tools=[finish],
    )
    instrument(agent, tracer_provider=provider)
    agent.invoke()
    spans = exporter.get_finished_spans()
    helper, tool_span = one(spans, "helper_run"), one(spans, "execute_tool run_shell_script")
    assert parent_of(helper) == span_id(tool_span)
    assert helper.attributes is not None
    assert helper.attributes["roboz.helper.status"] == "timeout"
    assert helper.attributes["roboz.helper.limit"] == "timeout"
    assert helper.attributes["roboz.helper.exit_status"] == 137
    assert helper.status.status_code is StatusCode.ERROR
    assert tool_span.attributes is not None and tool_span.attributes["roboz.tool.status"] == "error"


def test_a_nested_agent_is_a_child_of_the_tool_that_runs_it(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    sink = OTelSink(tracer_provider=provider)

    @tool
    def inner_start(input: Empty, messages: list[Message]) -> Stop:
        """Done at once."""
        return Stop(value="inner")

    inner = Agent("inner", mode=AgentMode.DETERMINISTIC, default_tools=[inner_start])
    sink.subscribe(inner.event_pipe)

    @tool
    def delegate(input: Empty, messages: list[Message]) -> Stop:
        """Run the inner agent."""
        result, _ = inner.invoke()
        return Stop(value=result.value)

    outer = Agent("outer", mode=AgentMode.DETERMINISTIC, default_tools=[delegate])
    sink.subscribe(outer.event_pipe)
    outer.invoke()
    spans = exporter.get_finished_spans()
    assert parent_of(one(spans, "invoke_agent inner")) == span_id(
        one(spans, "execute_tool delegate")
    )
    assert parent_of(one(spans, "invoke_agent outer")) is None


def test_without_an_sdk_the_api_is_a_no_op() -> None:
    agent = llm_agent(REPLIES)
    sink = instrument(agent)  # no provider configured: the API's no-op tracer
    result, _ = agent.invoke()
    assert result.value == "bye"
    sink.unsubscribe()
    assert sink not in agent.event_pipe.sinks


def test_chained_calls_can_be_summarised_on_their_step(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    @tool
    def start(input: Empty, messages: list[Message]) -> Int:
        """Start."""
        return Int(value=0)

    @tool(chained_to=["start", "tick"], chain_condition=lambda x: x.value < 5)
    def tick(input: Int, messages: list[Message]) -> Int:
        """Count."""
        return Int(value=input.value + 1)

    @tool(chained_to=tick, chain_condition=lambda x: x.value >= 5)
    def check(input: Int, messages: list[Message]) -> ShellScriptOutcome:
        """A chained call that goes wrong still gets a span."""
        return ShellScriptOutcome(value="", script="s.sh", status="failed", exit_status=1)

    @tool(chained_to=check)
    def end(input: Str, messages: list[Message]) -> Stop:
        """End."""
        return Stop()

    agent = Agent(
        "hot", mode=AgentMode.DETERMINISTIC, default_tools=[start], tools=[tick, check, end]
    )
    instrument(agent, tracer_provider=provider, chained_spans=False)
    agent.invoke()
    spans = exporter.get_finished_spans()
    assert not named(spans, "execute_tool tick") and not named(spans, "execute_tool end")
    step = one(spans, "step 1").attributes or {}
    assert step["roboz.step.chained_calls"] == 6
    assert tuple(step["roboz.step.chained_tools"]) == ("tick", "end")  # type: ignore[arg-type]
    failed = one(spans, "execute_tool check")
    assert parent_of(failed) == span_id(one(spans, "step 1"))
    assert (failed.attributes or {})["roboz.tool.status"] == "error"
    assert parent_of(one(spans, "helper_run")) == span_id(failed)


def test_two_sinks_on_one_pipe_each_get_the_whole_tree() -> None:
    exporters = [InMemorySpanExporter(), InMemorySpanExporter()]
    providers = []
    agent = llm_agent(REPLIES)
    for exporter in exporters:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        providers.append(provider)
        instrument(agent, tracer_provider=provider)
    agent.invoke()
    first, second = (exporter.get_finished_spans() for exporter in exporters)
    assert sorted(s.name for s in first) == sorted(s.name for s in second)
    for spans in (first, second):
        run = one(spans, "invoke_agent greeter")
        assert parent_of(run) is None
        assert parent_of(one(spans, "step 1")) == span_id(run)
    for provider in providers:
        provider.shutdown()


def test_a_run_inside_an_application_span_is_its_child(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = llm_agent(REPLIES)
    instrument(agent, tracer_provider=provider)
    with provider.get_tracer("app").start_as_current_span("request"):
        agent.invoke()
    spans = exporter.get_finished_spans()
    assert parent_of(one(spans, "invoke_agent greeter")) == span_id(one(spans, "request"))
    from opentelemetry import trace

    assert not trace.get_current_span().get_span_context().is_valid  # nothing left attached
