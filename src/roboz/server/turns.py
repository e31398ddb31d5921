"""The turns this server runs: each an ``AgentRun`` of a served agent, a task of the server's
loop, writing its thread through the notifying store.

A request that starts a turn returns once the run holds its thread (its lease taken, the
user's message recorded), so a thread busy elsewhere or a refused request is answered with
an error and nothing recorded, never with "accepted" and a failure later. At shutdown the
manager stops taking turns, lets running ones finish for a grace period and cancels the rest;
a cancelled run records its end in the thread itself (the run's own persistence does that).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol, cast

from roboz.agent import Agent, AgentCancelledError, AgentRun
from roboz.agent.request import RunRequest
from roboz.models import Message, Role
from roboz.runtime.events import AgentStarted, Event
from roboz.server.errors import ApiError
from roboz.server.notify import NotifyingStore
from roboz.threads import ThreadBusyError, ThreadStore

log = logging.getLogger("roboz.server.turns")


class Turns(Protocol):
    """How a server runs turns: in this process (:class:`TurnManager`) or on ``roboz worker``
    processes (``durable_turns.DurableTurns``)."""

    durable: bool
    accepting: bool

    @property
    def count(self) -> int: ...

    def running(self, thread_id: str) -> bool: ...

    async def start(
        self,
        agent: Agent,
        thread_id: str,
        *,
        text: str | None = None,
        request: RunRequest | None = None,
        results: Mapping[str, Any] | None = None,
    ) -> str | None: ...

    def cancel(self, thread_id: str) -> bool: ...

    async def cancel_turn(self, thread_id: str) -> bool: ...

    async def drain(self, grace_s: float) -> None: ...


class TurnManager:
    """Starts, tracks, cancels and drains the turns of one server process."""

    durable = False

    def __init__(self, store: Any, changed: Callable[[str], None]) -> None:
        self._store = cast(ThreadStore, NotifyingStore(store, changed))
        self._changed = changed
        self._runs: dict[str, AgentRun] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.accepting = True

    def running(self, thread_id: str) -> bool:
        return thread_id in self._runs

    @property
    def count(self) -> int:
        return len(self._runs)

    async def start(
        self,
        agent: Agent,
        thread_id: str,
        *,
        text: str | None = None,
        request: RunRequest | None = None,
        results: Mapping[str, Any] | None = None,
    ) -> None:
        """Begin a turn (a user's ``text``, or client tool ``results``) and return once the
        run holds the thread; a refusal before that is raised here. (No turn id: the turn
        is the run this process holds.)"""
        if not self.accepting:
            raise ApiError(503, "shutting_down", "the server is shutting down; retry elsewhere")
        if thread_id in self._runs:
            raise ThreadBusyError(
                f"thread {thread_id!r} is already running a turn; wait for it to end or cancel it"
            )
        if results is None:
            messages = [Message(role=Role.USER, content=text or "")]
            run = agent.new_run(messages, thread_id, request, store=self._store)
        else:
            run = AgentRun(
                agent.run_spec(), thread_id=thread_id, results=results, store=self._store
            )
        loop = asyncio.get_running_loop()
        started: asyncio.Future[None] = loop.create_future()

        def on_event(event: Event) -> None:
            if isinstance(event, AgentStarted) and not started.done():
                loop.call_soon_threadsafe(_settle, started)

        unsubscribe = run.pipe.subscribe(on_event)
        self._runs[thread_id] = run
        task = asyncio.ensure_future(run.run_async())
        self._tasks.add(task)
        task.add_done_callback(lambda done: self._ended(thread_id, run, done))
        try:
            waiting: list[asyncio.Future[Any]] = [started, task]
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        finally:
            unsubscribe()
        if not started.done() and task.done():
            error = task.exception()
            if error is not None:
                raise error
        started.cancel()

    def _ended(self, thread_id: str, run: AgentRun, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if self._runs.get(thread_id) is run:
            del self._runs[thread_id]
        # Streams that end with the turn (AG-UI runs) hear of it, not only of its writes.
        self._changed(thread_id)
        if task.cancelled():
            return
        error = task.exception()
        if isinstance(error, AgentCancelledError):
            log.info("turn of thread %s cancelled", thread_id)
        elif error is not None:
            log.warning("turn of thread %s failed: %s: %s", thread_id, type(error).__name__, error)

    def cancel(self, thread_id: str) -> bool:
        """Cancel the turn this process runs on ``thread_id``; False when it runs none."""
        run = self._runs.get(thread_id)
        if run is None:
            return False
        run.cancel()
        return True

    async def cancel_turn(self, thread_id: str) -> bool:
        return self.cancel(thread_id)

    async def drain(self, grace_s: float) -> None:
        """Stop taking turns; let running ones finish for ``grace_s`` seconds, then cancel
        them and wait for each to record its end."""
        self.accepting = False
        pending = set(self._tasks)
        if not pending:
            return
        log.info("waiting up to %.0f s for %d running turn(s)", grace_s, len(pending))
        _, pending = await asyncio.wait(pending, timeout=grace_s)
        if not pending:
            return
        log.info("cancelling %d turn(s) still running", len(pending))
        for run in list(self._runs.values()):
            run.cancel()
        _, pending = await asyncio.wait(pending, timeout=30)
        for task in pending:  # a tool that ignores cancellation: stop waiting for it
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
