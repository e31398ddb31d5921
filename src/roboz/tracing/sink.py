"""OTelSink: OpenTelemetry spans from an agent's event pipe, so the core knows nothing of it.

Spans: one per run (``invoke_agent NAME``), one per step (a chain started by a default tool,
``prompt_llm`` included), one per tool call (``execute_tool NAME``: trigger, status, denial
reason), one per LLM call (``chat MODEL``, GenAI semantic conventions) and one per SafeScripts
helper run. Spans are made current while open, so whatever a tool does (an instrumented HTTP
client, a nested agent) lands below its tool span.

Nothing the LLM was shown or said goes into attributes unless ``capture_content=True``: the
events carry prompt sizes and token counts, and that is what is recorded.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from roboz.runtime.events import (
    AgentFailed,
    AgentFinished,
    AgentStarted,
    Event,
    EventPipe,
    LLMReplied,
    LLMReplyRejected,
    LLMRequested,
    ToolFinished,
    ToolStarted,
)

CONTENT_LIMIT = 4096
_SUCCESSFUL_RUNS = ("success", "listed")


@dataclass
class _Open:
    span: Span
    token: object
    started_ns: int = 0


@dataclass
class _Run:
    run: _Open
    parent: _Run | None
    step: _Open | None = None
    steps: int = 0
    tool: _Open | None = None
    tool_name: str = ""
    denial: str | None = None
    llm: Span | None = None
    extra: dict[str, Any] = field(default_factory=dict)


_current: contextvars.ContextVar[_Run | None] = contextvars.ContextVar(
    "roboz_otel_run", default=None
)


class OTelSink:
    """An event sink that records spans; subscribe it to a pipe or use ``instrument``."""

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        capture_content: bool = False,
    ) -> None:
        from roboz import __version__

        self.tracer = trace.get_tracer("roboz", __version__, tracer_provider=tracer_provider)
        self.capture_content = capture_content
        self._unsubscribe: Callable[[], None] | None = None
        self._handlers: dict[type, Callable[[Any], None]] = {
            AgentStarted: self._agent_started,
            AgentFinished: self._agent_finished,
            AgentFailed: self._agent_failed,
            ToolStarted: self._tool_started,
            ToolFinished: self._tool_finished,
            LLMRequested: self._llm_requested,
            LLMReplied: self._llm_replied,
            LLMReplyRejected: self._llm_rejected,
        }

    def subscribe(self, pipe: EventPipe) -> OTelSink:
        self._unsubscribe = pipe.subscribe(self)
        return self

    def unsubscribe(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def __call__(self, event: Event) -> None:
        handler = self._handlers.get(type(event))
        if handler is None:
            handler = self._handler_for(type(event))
        handler(event)

    def _handler_for(self, kind: type) -> Callable[[Any], None]:
        # Permission decisions come from layers above the core (guarded files, MCP rules);
        # they are recognised by shape, so this module imports none of them.
        fields = getattr(kind, "__dataclass_fields__", {})
        handler = self._decision if "verdict" in fields else _ignore
        self._handlers[kind] = handler
        return handler

    # -- runs and steps ------------------------------------------------------------------------

    def _start(self, name: str, attributes: dict[str, Any], start_ns: int | None = None) -> _Open:
        span = self.tracer.start_span(name, attributes=attributes, start_time=start_ns)
        token = otel_context.attach(trace.set_span_in_context(span))
        return _Open(span, token)

    def _agent_started(self, event: AgentStarted) -> None:
        opened = self._start(
            f"invoke_agent {event.agent}",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": event.agent or "",
                "roboz.agent.mode": event.mode,
            },
        )
        _current.set(_Run(opened, _current.get()))

    def _agent_finished(self, event: AgentFinished) -> None:
        state = _current.get()
        if state is None:
            return
        span = state.run.span
        span.set_attribute("roboz.agent.steps", event.steps)
        span.set_attribute("roboz.agent.llm_calls", event.llm_calls)
        span.set_status(Status(StatusCode.OK))
        self._close_run(state)

    def _agent_failed(self, event: AgentFailed) -> None:
        state = _current.get()
        if state is None:
            return
        description = _clip(event.error) if self.capture_content else "the agent run failed"
        failed = Status(StatusCode.ERROR, description)
        if state.llm is not None:
            state.llm.set_status(failed)
        if state.tool is not None:
            state.tool.span.set_attribute("roboz.tool.status", "error")
            state.tool.span.set_status(failed)
        state.run.span.set_attribute("error.type", "AgentRunError")
        state.run.span.set_status(failed)
        self._close_run(state)

    def _close_run(self, state: _Run) -> None:
        if state.llm is not None:
            state.llm.end()
            state.llm = None
        for opened in (state.tool, state.step, state.run):
            if opened is not None:
                opened.span.end()
                otel_context.detach(opened.token)  # type: ignore[arg-type]
        state.tool = state.step = None
        _current.set(state.parent)

    # -- tools ---------------------------------------------------------------------------------

    def _tool_started(self, event: ToolStarted) -> None:
        state = _current.get()
        if state is None:
            return
        if state.tool is not None:  # a finish we never saw (the tool raised): close it
            state.tool.span.end()
            otel_context.detach(state.tool.token)  # type: ignore[arg-type]
            state.tool = None
        if event.trigger == "default":
            if state.step is not None:
                state.step.span.end()
                otel_context.detach(state.step.token)  # type: ignore[arg-type]
            state.steps += 1
            state.step = self._start(
                f"step {state.steps}",
                {"roboz.step.number": state.steps, "roboz.step.default": event.tool},
            )
        opened = self._start(
            f"execute_tool {event.tool}",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": event.tool,
                "roboz.tool.trigger": event.trigger,
            },
        )
        opened.started_ns = _now_ns(opened.span)
        state.tool, state.tool_name, state.denial = opened, event.tool, None

    def _tool_finished(self, event: ToolFinished) -> None:
        state = _current.get()
        if state is None or state.tool is None:
            return
        opened, output = state.tool, event.output
        span = opened.span
        status = "denied" if state.denial is not None else _status_of(output)
        span.set_attribute("roboz.tool.status", status)
        span.set_attribute("roboz.tool.output_type", type(output).__name__)
        if state.denial is not None:
            span.set_attribute("roboz.tool.denial_reason", state.denial)
        if _is_helper_run(output):
            self._helper_run(output, opened.started_ns)
        span.set_status(Status(StatusCode.ERROR if status == "error" else StatusCode.OK))
        span.end()
        otel_context.detach(opened.token)  # type: ignore[arg-type]
        state.tool = None

    def _decision(self, event: Any) -> None:
        state = _current.get()
        if state is None or state.tool is None or getattr(event, "verdict", "") != "deny":
            return
        reason = (getattr(event, "reason", "") or "").strip() or "denied by policy"
        if state.denial is None:
            state.denial = reason
        attributes = {
            "roboz.permission.operation": getattr(event, "operation", ""),
            "reason": reason,
        }
        if self.capture_content:
            attributes["roboz.permission.path"] = getattr(event, "path", "")
        state.tool.span.add_event("permission_denied", attributes)

    def _helper_run(self, outcome: Any, started_ns: int) -> None:
        span = self.tracer.start_span(
            "helper_run",
            start_time=started_ns or None,
            attributes={
                "roboz.helper.script": str(getattr(outcome, "script", "")),
                "roboz.helper.status": str(outcome.status),
            },
        )
        exit_status = getattr(outcome, "exit_status", None)
        if exit_status is not None:
            span.set_attribute("roboz.helper.exit_status", int(exit_status))
        limit = getattr(outcome, "limit", None)
        if limit:
            span.set_attribute("roboz.helper.limit", str(limit))
        ok = outcome.status in _SUCCESSFUL_RUNS
        span.set_status(Status(StatusCode.OK if ok else StatusCode.ERROR))
        span.end()

    # -- LLM calls -----------------------------------------------------------------------------

    def _llm_requested(self, event: LLMRequested) -> None:
        state = _current.get()
        if state is None:
            return
        if state.llm is not None:  # asked again: the previous reply was rejected
            state.llm.set_attribute("roboz.llm.reply_rejected", True)
            state.llm.end()
        state.llm = self.tracer.start_span(
            f"chat {event.model}",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.system": event.endpoint or "unknown",
                "gen_ai.request.model": event.model,
                "roboz.llm.messages": event.messages,
            },
        )

    def _llm_replied(self, event: LLMReplied) -> None:
        state = _current.get()
        if state is None or state.llm is None:
            return
        span = state.llm
        span.set_attribute("gen_ai.usage.input_tokens", event.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", event.output_tokens)
        if self.capture_content:
            span.set_attribute("gen_ai.completion", _clip(event.text))
        span.set_status(Status(StatusCode.OK))
        span.end()
        state.llm = None

    def _llm_rejected(self, event: LLMReplyRejected) -> None:
        state = _current.get()
        if state is None:
            return
        target = state.llm if state.llm is not None else state.tool and state.tool.span
        if target:
            attributes = {"reason": _clip(event.reason)} if self.capture_content else {}
            target.add_event("llm_reply_rejected", attributes)


def instrument(
    agent: Any,
    *,
    tracer_provider: trace.TracerProvider | None = None,
    capture_content: bool = False,
) -> OTelSink:
    """Trace ``agent`` (anything with an ``event_pipe``); returns the subscribed sink."""
    pipe = getattr(agent, "event_pipe", agent)
    if not isinstance(pipe, EventPipe):
        raise TypeError(f"instrument() needs an Agent or an EventPipe, got {agent!r}")
    sink = OTelSink(tracer_provider=tracer_provider, capture_content=capture_content)
    return sink.subscribe(pipe)


def _status_of(output: Any) -> str:
    if getattr(output, "ok", True) is False:
        return "error"
    status = getattr(output, "status", None)
    if isinstance(status, str) and hasattr(output, "script"):
        return "ok" if status in _SUCCESSFUL_RUNS else "error"
    exit_status = getattr(output, "exit_status", None)
    if isinstance(exit_status, int) and exit_status != 0:
        return "error"
    return "ok"


def _is_helper_run(output: Any) -> bool:
    return hasattr(output, "script") and isinstance(getattr(output, "status", None), str)


def _now_ns(span: Span) -> int:
    return int(getattr(span, "start_time", 0) or 0)


def _clip(text: str) -> str:
    return text if len(text) <= CONTENT_LIMIT else text[: CONTENT_LIMIT - 1] + "…"


def _ignore(event: Any) -> None:
    return None
