"""The agent whose run is in progress, for tools that act on behalf of it (e.g. compaction
summarizing with the agent's own endpoint when none is configured)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Generator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from roboz.agent.agent import Agent

_current: contextvars.ContextVar[Agent | None] = contextvars.ContextVar(
    "roboz_current_agent", default=None
)


def current_agent() -> Agent | None:
    """The agent running the current tool, if any."""
    return _current.get()


@contextlib.contextmanager
def use_agent(agent: Agent) -> Generator[None, None, None]:
    token = _current.set(agent)
    try:
        yield
    finally:
        _current.reset(token)
