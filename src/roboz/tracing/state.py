"""What a sink keeps per agent run, and the context it shares with other sinks."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.trace import Span


@dataclass
class Opened:
    span: Span
    token: object | None
    started_ns: int = 0


@dataclass
class RunState:
    run: Opened
    parent: RunState | None
    # Only one sink per context makes its spans current: attach/detach must nest, and two
    # sinks on one pipe would interleave them.
    attaches: bool = True
    shared_token: object | None = None
    # No SDK configured (the API's no-op tracer): nothing below the run would be recorded.
    quiet: bool = False
    step: Opened | None = None
    steps: int = 0
    tool: Opened | None = None
    tool_name: str = ""
    denial: str | None = None
    decisions: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    llm: Span | None = None
    # chained_spans=False: chained calls that went well are only counted on their step.
    chained_started_ns: int = 0
    chained_calls: int = 0
    chained_ns: int = 0
    chained_tools: list[str] = field(default_factory=list[str])

    def innermost(self) -> Span:
        """The open span new spans of this run go below."""
        for opened in (self.tool, self.step):
            if opened is not None:
                return opened.span
        return self.run.span


# The sink that attaches contexts in this context, and the context the outermost run began in
# (the parent of every sink's outermost run span, so no sink nests under another's spans).
SHARED: contextvars.ContextVar[tuple[object, otel_context.Context] | None] = contextvars.ContextVar(
    "roboz_otel_shared", default=None
)


def detach(opened: Opened) -> None:
    if opened.token is not None:
        otel_context.detach(opened.token)  # type: ignore[arg-type]
