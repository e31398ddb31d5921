"""One provider request with a hard deadline and prompt cancellation.

The blocking SDK call runs on its own short-lived thread while the caller waits for the
first of: the reply, the deadline, or the cancel event. Each call gets a fresh thread and
nothing is shared between calls, so an abandoned request can never hold a slot that a later
call needs; it ends by itself when the SDK's own timeout (set to the same value) fires.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")

# How often a waiting caller looks at its cancel event.
CANCEL_POLL_S = 0.05


class AttemptTimedOut(Exception):
    pass


class AttemptCancelled(Exception):
    pass


class AttemptGate:
    """Lets the worker deliver output only while the caller is still waiting for it.

    The caller closes the gate (under the lock) when it gives up, so once ``run_attempt``
    has raised, no further delta reaches the caller's callback.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = True

    def deliver(self, callback: Callable[[str], None], text: str) -> bool:
        with self._lock:
            if not self._open:
                return False
            callback(text)
            return True

    def close(self) -> None:
        with self._lock:
            self._open = False


class _Outcome(Generic[T]):
    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: T | None = None
        self.error: BaseException | None = None


def run_attempt(
    work: Callable[[AttemptGate], T],
    *,
    timeout_s: float,
    cancel: threading.Event | None,
) -> T:
    """Run ``work(gate)`` on a fresh thread; raise AttemptTimedOut or AttemptCancelled."""
    gate = AttemptGate()
    outcome: _Outcome[T] = _Outcome()
    # The worker sees the caller's context variables (the current event pipe, for example).
    context = contextvars.copy_context()

    def target() -> None:
        try:
            outcome.value = context.run(work, gate)
        except BaseException as error:
            outcome.error = error
        finally:
            outcome.done.set()

    threading.Thread(target=target, name="roboz-llm-request", daemon=True).start()
    deadline = time.monotonic() + timeout_s
    while not outcome.done.is_set():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            gate.close()
            raise AttemptTimedOut
        if cancel is not None and cancel.is_set():
            gate.close()
            raise AttemptCancelled
        outcome.done.wait(remaining if cancel is None else min(remaining, CANCEL_POLL_S))
    gate.close()
    if outcome.error is not None:
        raise outcome.error
    return outcome.value  # type: ignore[return-value]


async def run_async_attempt(
    work: Awaitable[T], *, timeout_s: float, cancel: threading.Event | None
) -> T:
    """Await ``work`` as a task; raise AttemptTimedOut or AttemptCancelled, and cancel the
    task (closing its connection) whenever we stop waiting for it, including when the
    awaiting task is itself cancelled."""
    task = asyncio.ensure_future(work)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AttemptTimedOut
            if cancel is not None and cancel.is_set():
                raise AttemptCancelled
            done, _ = await asyncio.wait(
                {task}, timeout=remaining if cancel is None else min(remaining, CANCEL_POLL_S)
            )
            if done:
                return task.result()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not report it
