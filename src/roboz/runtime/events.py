"""Typed events an agent run emits, and the pipe that carries them to sinks."""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from roboz.runtime.usage import RunUsage

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Event:
    """Base of every event; ``agent`` names the agent that emitted it (if any), ``run_id``
    the run (set by the run's pipe as the event passes), so a sink shared by concurrent runs
    of one agent tells them apart."""

    agent: str | None = field(default=None, kw_only=True)
    run_id: str | None = field(default=None, kw_only=True)


@dataclass(frozen=True)
class AgentStarted(Event):
    mode: str = ""


@dataclass(frozen=True)
class AgentFinished(Event):
    """The run ended with ``output`` (its Stop); ``usage`` is every LLM call it made."""

    output: Any = None
    steps: int = 0
    llm_calls: int = 0
    usage: RunUsage = field(default_factory=RunUsage)


@dataclass(frozen=True)
class AgentFailed(Event):
    """The run ended with an error; ``usage`` counts the LLM calls made until then.
    ``cancelled``: it was cancelled (``AgentCancelledError``), not broken."""

    error: str = ""
    usage: RunUsage = field(default_factory=RunUsage)
    cancelled: bool = False


@dataclass(frozen=True)
class ToolStarted(Event):
    tool: str = ""
    trigger: str = ""  # "default", "invoked" or "chained"


@dataclass(frozen=True)
class ToolFinished(Event):
    tool: str = ""
    output: Any = None
    duration_s: float = 0.0


@dataclass(frozen=True)
class SkillLoaded(Event):
    skill: str = ""


@dataclass(frozen=True)
class LLMRequested(Event):
    endpoint: str = ""
    model: str = ""
    messages: int = 0


@dataclass(frozen=True)
class LLMDelta(Event):
    text: str = ""


@dataclass(frozen=True)
class LLMProseDelta(Event):
    """Decoded text of one field of the reply being generated, as it arrives.

    The agent parses its LLM's JSON action incrementally: ``field`` is ``"rationale"`` or the
    name of a text argument of the action (``"value"`` for ``stop``), ``action`` the action
    named so far (``""`` until the reply has named it). Concatenating the ``text`` of one
    field gives its value. A reply that is then rejected is followed by LLMReplyRejected.
    """

    field: str = ""
    text: str = ""
    action: str = ""


@dataclass(frozen=True)
class LLMReplied(Event):
    text: str = ""
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class LLMReplyRejected(Event):
    """A reply (or a tool's ``Retry``) that went back to the LLM with ``reason``."""

    reason: str = ""
    reply: str = ""


@dataclass(frozen=True)
class UserNotified(Event):
    message: str = ""


@dataclass(frozen=True)
class UserPrompted(Event):
    prompt: str = ""


Sink = Callable[[Event], None]


class EventPipe:
    """Fans events out to subscribed sinks. A failing sink is logged, never fatal to the run."""

    def __init__(self, sinks: list[Sink] | None = None) -> None:
        # Replaced, never mutated: an emit in progress keeps the tuple it started with, so a
        # sink that unsubscribes itself (or another) mid-emit cannot make a later one miss it.
        self._sinks: tuple[Sink, ...] = tuple(sinks or ())

    def subscribe(self, sink: Sink) -> Callable[[], None]:
        self._sinks = (*self._sinks, sink)

        def unsubscribe() -> None:
            sinks = list(self._sinks)
            with contextlib.suppress(ValueError):
                sinks.remove(sink)
            self._sinks = tuple(sinks)

        return unsubscribe

    @property
    def sinks(self) -> tuple[Sink, ...]:
        return self._sinks

    @property
    def heard(self) -> bool:
        """Whether an event emitted now reaches any sink (a run builds the events of every
        step only when one does)."""
        return bool(self._sinks)

    @property
    def wants_deltas(self) -> bool:
        """True when some sink consumes LLM deltas, so endpoints should stream.

        A sink opts out by setting ``wants_deltas = False`` on itself; plain callables are
        assumed to want everything.
        """
        return any(getattr(sink, "wants_deltas", True) for sink in self._sinks)

    def emit(self, event: Event) -> None:
        for sink in self._sinks:
            try:
                sink(event)
            except Exception:
                logger.exception("event sink %r failed on %s", sink, type(event).__name__)


class RunPipe(EventPipe):
    """The pipe of one run: stamps each event with the run's id, hands it to the run's own
    sinks (e.g. a stream's queue), then to the agent's pipe.

    Concurrent runs of one agent share the agent's pipe; what belongs to a single run (a
    stream of its events) subscribes here, so it never hears another run.
    """

    def __init__(self, outer: EventPipe, run_id: str) -> None:
        super().__init__()
        self.outer = outer
        self.run_id = run_id

    @property
    def wants_deltas(self) -> bool:
        return super().wants_deltas or self.outer.wants_deltas

    @property
    def heard(self) -> bool:
        return bool(self._sinks) or self.outer.heard

    def emit(self, event: Event) -> None:
        outer = self.outer
        if not self._sinks and not outer.heard:
            return  # nobody hears it (the hot path of a run without sinks stays as cheap)
        if event.run_id is None:
            # Frozen for sinks; stamped once, here, before any sink sees it (cheaper than a
            # copy per event on the hot path).
            object.__setattr__(event, "run_id", self.run_id)
        if self._sinks:
            super().emit(event)
        outer.emit(event)


_current_pipe: contextvars.ContextVar[EventPipe | None] = contextvars.ContextVar(
    "roboz_event_pipe", default=None
)


def current_pipe() -> EventPipe | None:
    """The pipe of the agent run in progress, if any."""
    return _current_pipe.get()


@contextlib.contextmanager
def use_pipe(pipe: EventPipe | None) -> Generator[None, None, None]:
    token = _current_pipe.set(pipe)
    try:
        yield
    finally:
        _current_pipe.reset(token)


def emit(event: Event) -> None:
    """Emit on the current run's pipe; a no-op outside a run."""
    pipe = _current_pipe.get()
    if pipe is not None:
        pipe.emit(event)


@dataclass(frozen=True)
class ToolOutput(Event):
    """Output a tool produces while it runs (a script's stdout or stderr), for live display.

    The tool's result still carries the output as before; these events are bounded per call,
    and ``truncated`` marks the last one once that bound was reached.
    """

    tool: str = ""
    stream: str = ""
    text: str = ""
    truncated: bool = False
