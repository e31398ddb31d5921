"""``idempotency_key()``: the key a tool with external effects hands to the outside world.

A durable tool step runs at least once: if its worker dies after the effect but before DBOS
saved the step's result, the step runs again when the turn resumes. An effect is exactly once
only when the other side deduplicates it, and the key to deduplicate on is the step's
identity, ``"<workflow_id>:<step_id>"``, the same on every attempt of that step and
different for every other step::

    @tool
    def charge(order: Order, messages: list[Message]) -> Receipt:
        \"\"\"Charge the order.\"\"\"
        return Receipt(id=payments.charge(order.cents, idempotency_key=idempotency_key()))
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from contextvars import ContextVar

from roboz.durable.errors import DurableError

_KEY: ContextVar[str | None] = ContextVar("roboz_durable_step", default=None)


def idempotency_key() -> str:
    """``"<workflow_id>:<step_id>"`` inside a durable tool step; DurableError elsewhere."""
    key = _KEY.get()
    if key is None:
        raise DurableError(
            "idempotency_key() exists only inside a tool step of a durable run "
            "(roboz.durable.DurableRuns); this tool runs outside one, or is declared pure"
        )
    return key


def in_step() -> bool:
    """Whether a durable tool step is running in this context."""
    return _KEY.get() is not None


@contextmanager
def step_key(key: str) -> Generator[None, None, None]:
    token = _KEY.set(key)
    try:
        yield
    finally:
        _KEY.reset(token)
