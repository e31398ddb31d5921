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
import time
from collections.abc import Callable
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
from roboz.tracing.outcomes import SUCCESSFUL_RUNS, shape_of, status_of
from roboz.tracing.state import SHARED, Opened, RunState, detach

CONTENT_LIMIT = 4096


class OTelSink:
    """An event sink that records spans; subscribe it to a pipe or use ``instrument``."""

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        capture_content: bool = False,
        chained_spans: bool = True,
    ) -> None:
        from roboz import __version__

        self.tracer = trace.get_tracer("roboz", __version__, tracer_provider=tracer_provider)
        self.capture_content = capture_content
        self.chained_spans = chained_spans
        self._unsubscribe: Callable[[], None] | None = None
        # The run in progress in this context (thread or task); per sink, so two sinks on
        # one pipe keep their own books. A nested run points back to the one it runs in.
        self._current: contextvars.ContextVar[RunState | None] = contextvars.ContextVar(
            f"roboz_otel_run_{id(self)}", default=None
        )
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

    def _start(
        self, name: str, attributes: dict[str, Any], parent: otel_context.Context, attach: bool
    ) -> Opened:
        span = self.tracer.start_span(name, context=parent, attributes=attributes)
        token = otel_context.attach(trace.set_span_in_context(span)) if attach else None
        return Opened(span, token)

    def _agent_started(self, event: AgentStarted) -> None:
        enclosing = self._current.get()
        shared = SHARED.get()
        shared_token = None
        if shared is None:  # the outermost run in this context, whichever sink sees it first
            shared = (self, otel_context.get_current())
            shared_token = SHARED.set(shared)
        parent = (
            trace.set_span_in_context(enclosing.innermost()) if enclosing is not None else shared[1]
        )
        attaches = shared[0] is self
        opened = self._start(
            f"invoke_agent {event.agent}",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": event.agent or "",
                "roboz.agent.mode": event.mode,
            },
            parent,
            attaches,
        )
        quiet = not opened.span.get_span_context().is_valid
        self._current.set(
            RunState(opened, enclosing, attaches=attaches, shared_token=shared_token, quiet=quiet)
        )

    def _agent_finished(self, event: AgentFinished) -> None:
        state = self._current.get()
        if state is None:
            return
        span = state.run.span
        span.set_attributes(
            {"roboz.agent.steps": event.steps, "roboz.agent.llm_calls": event.llm_calls}
        )
        self._close_run(state)

    def _agent_failed(self, event: AgentFailed) -> None:
        state = self._current.get()
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

    def _close_run(self, state: RunState) -> None:
        if state.llm is not None:
            state.llm.end()
            state.llm = None
        if state.tool is not None:
            state.tool.span.end()
            detach(state.tool)
            state.tool = None
        self._end_step(state)
        state.run.span.end()
        detach(state.run)
        if state.shared_token is not None:
            SHARED.reset(state.shared_token)  # type: ignore[arg-type]
        self._current.set(state.parent)

    # -- tools ---------------------------------------------------------------------------------

    def _tool_started(self, event: ToolStarted) -> None:
        state = self._current.get()
        if state is None or state.quiet:
            return
        if state.tool is not None:  # a finish we never saw (the tool raised): close it
            state.tool.span.end()
            detach(state.tool)
            state.tool = None
        if event.trigger == "default":
            self._end_step(state)
            state.steps += 1
            state.step = self._start(
                f"step {state.steps}",
                {"roboz.step.number": state.steps, "roboz.step.default": event.tool},
                trace.set_span_in_context(state.run.span),
                state.attaches,
            )
        state.tool_name, state.denial = event.tool, None
        state.decisions.clear()
        if event.trigger == "chained" and not self.chained_spans:
            state.chained_started_ns = time.time_ns()  # a span only if it goes wrong
            return
        opened = self._start(
            f"execute_tool {event.tool}",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": event.tool,
                "roboz.tool.trigger": event.trigger,
            },
            trace.set_span_in_context(state.innermost()),
            state.attaches,
        )
        opened.started_ns = _now_ns(opened.span)
        state.tool = opened

    def _tool_finished(self, event: ToolFinished) -> None:
        state = self._current.get()
        if state is None or state.quiet:
            return
        output: object = event.output
        shape = shape_of(type(output))
        status = "denied" if state.denial is not None else status_of(output, shape)
        opened = state.tool
        if opened is None:
            if not state.chained_started_ns:
                return
            started, state.chained_started_ns = state.chained_started_ns, 0
            if status == "ok" and not shape.helper_run:
                state.chained_calls += 1
                state.chained_ns += time.time_ns() - started
                if event.tool not in state.chained_tools:
                    state.chained_tools.append(event.tool)
                return
            opened = Opened(
                self.tracer.start_span(
                    f"execute_tool {event.tool}",
                    context=trace.set_span_in_context(state.innermost()),
                    start_time=started,
                    attributes={
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": event.tool,
                        "roboz.tool.trigger": "chained",
                    },
                ),
                None,
                started,
            )
        span = opened.span
        attributes: dict[str, Any] = {
            "roboz.tool.status": status,
            "roboz.tool.output_type": type(output).__name__,
        }
        if state.denial is not None:
            attributes["roboz.tool.denial_reason"] = state.denial
            for decision in state.decisions:
                span.add_event("permission_denied", decision)
            state.decisions.clear()
        span.set_attributes(attributes)
        if shape.helper_run:
            self._helper_run(output, opened.started_ns, span)
        if status == "error":
            span.set_status(Status(StatusCode.ERROR))
        span.end()
        detach(opened)
        state.tool = None

    def _end_step(self, state: RunState) -> None:
        step = state.step
        if step is None:
            return
        if state.chained_calls:
            step.span.set_attributes(
                {
                    "roboz.step.chained_calls": state.chained_calls,
                    "roboz.step.chained_tools": list(state.chained_tools),
                    "roboz.step.chained_duration_s": state.chained_ns / 1e9,
                }
            )
            state.chained_calls, state.chained_ns = 0, 0
            state.chained_tools.clear()
        step.span.end()
        detach(step)
        state.step = None

    def _decision(self, event: Any) -> None:
        state = self._current.get()
        if state is None or state.quiet or getattr(event, "verdict", "") != "deny":
            return
        if state.tool is None and not state.chained_started_ns:
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
        state.decisions.append(attributes)

    def _helper_run(self, outcome: Any, started_ns: int, parent: Span) -> None:
        span = self.tracer.start_span(
            "helper_run",
            context=trace.set_span_in_context(parent),
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
        if outcome.status not in SUCCESSFUL_RUNS:
            span.set_status(Status(StatusCode.ERROR))
        span.end()

    # -- LLM calls -----------------------------------------------------------------------------

    def _llm_requested(self, event: LLMRequested) -> None:
        state = self._current.get()
        if state is None or state.quiet:
            return
        if state.llm is not None:  # asked again: the previous reply was rejected
            state.llm.set_attribute("roboz.llm.reply_rejected", True)
            state.llm.end()
        state.llm = self.tracer.start_span(
            f"chat {event.model}",
            context=trace.set_span_in_context(state.innermost()),
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.system": event.endpoint or "unknown",
                "gen_ai.request.model": event.model,
                "roboz.llm.messages": event.messages,
            },
        )

    def _llm_replied(self, event: LLMReplied) -> None:
        state = self._current.get()
        if state is None or state.llm is None:
            return
        span = state.llm
        span.set_attribute("gen_ai.usage.input_tokens", event.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", event.output_tokens)
        if self.capture_content:
            span.set_attribute("gen_ai.completion", _clip(event.text))
        span.end()
        state.llm = None

    def _llm_rejected(self, event: LLMReplyRejected) -> None:
        state = self._current.get()
        if state is None or state.quiet:
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
    chained_spans: bool = True,
) -> OTelSink:
    """Trace ``agent`` (an Agent, or an EventPipe); returns the subscribed sink.

    ``chained_spans=False`` suits long deterministic chains: a chained call that succeeds is
    then counted on its step span (calls, tools, time) instead of getting a span of its own;
    chained calls that fail or are denied still get one.
    """
    pipe = getattr(agent, "event_pipe", agent)
    if not isinstance(pipe, EventPipe):
        raise TypeError(f"instrument() needs an Agent or an EventPipe, got {agent!r}")
    sink = OTelSink(
        tracer_provider=tracer_provider,
        capture_content=capture_content,
        chained_spans=chained_spans,
    )
    return sink.subscribe(pipe)


def _now_ns(span: Span) -> int:
    return int(getattr(span, "start_time", 0) or 0)


def _clip(text: str) -> str:
    return text if len(text) <= CONTENT_LIMIT else text[: CONTENT_LIMIT - 1] + "…"


def _ignore(event: Any) -> None:
    return None
