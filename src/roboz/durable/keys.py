"""``idempotency_key()``: the key a tool with external effects passes to the outside world."""

from __future__ import annotations

from roboz.durable.errors import DurableError


def idempotency_key() -> str:
    """``"<workflow_id>:<step_id>"`` inside a durable tool step; DurableError elsewhere."""
    raise DurableError("idempotency_key() is available only inside a durable tool step")
