"""The run context: what a tool of a run may reach beyond its ``(input, messages)``.

Tool signatures are fixed as ``(input, messages)``, so the run in progress puts its context
in one context variable for the length of the run and a tool reads it with
``current_run()`` (or the shortcuts ``current_scope()``, ``current_viewing_context()``,
``current_turn()``). It names the run's thread, scope, viewing context, user IO, cancel
signal and turn, never the Agent: tools act on behalf of this run, not of a definition
shared by many. Each run (and each nested run) sets its own, so concurrent runs of one
agent never see each other's.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from roboz.agent.transcript import Transcript
from roboz.agent.turn import Turn
from roboz.llm import EndpointLike
from roboz.runtime.events import EventPipe
from roboz.runtime.io import UserIO
from roboz.threads import AnalysisScope, ClientViewingContext

if TYPE_CHECKING:
    from roboz.agent.turn import GoalCheck
    from roboz.threads import ThreadStore


@dataclass(frozen=True, slots=True)
class RunContext:
    """One run as its tools see it."""

    run_id: str
    agent: str
    """The name of the agent whose run this is."""
    endpoint: EndpointLike | None
    """The agent's endpoint (e.g. for a tool that summarizes with it)."""
    store: ThreadStore | None
    """The store the run's thread is in (None: in memory)."""
    thread_id: str | None
    turn: Turn
    cancel: threading.Event
    """Set once the run is asked to stop; long tools poll it."""
    goal_checks: Mapping[str, GoalCheck]
    user_io: UserIO | None
    pipe: EventPipe
    """The run's own pipe (events reach the agent's sinks stamped with ``run_id``)."""
    transcript: Transcript
    """Where the run's messages go: its thread's sequence numbers (``last_seq``,
    ``seq(i)``). A tool adds messages by appending to the ``messages`` it is given."""

    @property
    def scope(self) -> AnalysisScope | None:
        return self.turn.scope

    @property
    def viewing_context(self) -> ClientViewingContext | None:
        return self.turn.viewing_context

    @property
    def cancelled(self) -> bool:
        return self.cancel.is_set()


_current: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar(
    "roboz_current_run", default=None
)


def current_run() -> RunContext | None:
    """The context of the run whose tool is executing, if any."""
    return _current.get()


def current_turn() -> Turn | None:
    """The thread state of the run whose tool is executing, if any."""
    run = _current.get()
    return None if run is None else run.turn


def current_scope() -> AnalysisScope | None:
    """The analysis scope of the current run (None: unconstrained). Tools opt in to it."""
    run = _current.get()
    return None if run is None else run.turn.scope


def current_viewing_context() -> ClientViewingContext | None:
    """What the user was looking at when they wrote the current turn's message, if given."""
    run = _current.get()
    return None if run is None else run.turn.viewing_context


@contextlib.contextmanager
def use_run(context: RunContext) -> Generator[None, None, None]:
    token = _current.set(context)
    try:
        yield
    finally:
        _current.reset(token)
