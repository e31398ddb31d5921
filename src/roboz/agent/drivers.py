"""The two drivers of the one scheduler: ``invoke`` (sync) and ``ainvoke`` (async).

The scheduler (``Scheduler``) is written once, as coroutines. It reaches the outside world
only through its driver: calling a tool, asking the endpoint, and a cooperative pause.

- ``SyncDriver`` makes every effect complete before returning, so the scheduler's coroutine
  never suspends and ``drive`` runs it with a single ``send(None)``: no event loop, no
  thread, no per-step cost beyond a coroutine call. Async tools (and async-only endpoints)
  run on a private loop thread of the run, started on first need and joined at the end.
- ``AsyncDriver`` awaits async tools (and a sync tool's async body, ``Tool.afunc``, when it
  has one) and ``acomplete`` on the caller's loop, runs sync tools
  and sync-only endpoints on a worker thread, and yields to the loop now and then so that a
  long run of instant steps does not starve other tasks.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar, cast

from roboz.llm import AsyncEndpointLike, Completion, EndpointLike, ProviderRecord
from roboz.llm.endpoint import DeltaCallback, complete_in_thread
from roboz.models import Empty, Message
from roboz.runtime.offload import in_worker_thread
from roboz.tools import Tool

T = TypeVar("T")

# Longest stretch an async run computes without giving other tasks a turn.
_YIELD_EVERY_S = 0.002
_CANCEL_POLL_S = 0.05


def drive(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (the scheduler under SyncDriver) to its end."""
    try:
        coroutine.send(None)
    except StopIteration as finished:
        return finished.value
    coroutine.close()
    raise RuntimeError("the agent scheduler suspended under the sync driver (a roboz bug)")


class SyncDriver:
    calls_inline = True
    """The scheduler may call a sync tool's function itself, and skip ``pause``: this driver
    would do no more (saves two coroutines per step). A subclass that records or redirects
    tool calls (a durable turn's) sets it False."""

    def __init__(self, cancel: threading.Event) -> None:
        self._cancel = cancel
        self._loop: _LoopThread | None = None

    async def call_tool(self, tool: Tool, value: Empty, messages: list[Message]) -> Any:
        if not tool.is_async:
            return tool.func(value, messages)
        return self._on_loop(lambda: tool.func(value, messages))

    async def complete(
        self,
        endpoint: EndpointLike,
        records: Sequence[ProviderRecord],
        on_delta: DeltaCallback | None,
    ) -> Completion:
        complete = getattr(endpoint, "complete", None)
        if complete is not None:
            return complete(records, on_delta=on_delta, cancel=self._cancel)
        acomplete = cast(AsyncEndpointLike, endpoint).acomplete  # an async-only endpoint
        return self._on_loop(lambda: acomplete(records, on_delta=on_delta, cancel=self._cancel))

    async def pause(self) -> None:
        return None

    def attach(self) -> None:
        return None

    def interrupt(self) -> None:
        """From ``Agent.cancel`` (any thread): effects in flight watch the cancel event."""
        self._cancel.set()

    def take_interrupt(self) -> bool:
        return False

    def _on_loop(self, start: Callable[[], Awaitable[T]]) -> T:
        if self._loop is None:
            self._loop = _LoopThread()
        return self._loop.run(start, self._cancel)

    def close(self) -> None:
        if self._loop is not None:
            self._loop.close()
            self._loop = None


class AsyncDriver:
    calls_inline = False  # sync tools go to worker threads; the loop is yielded now and then

    def __init__(self, cancel: threading.Event) -> None:
        self._cancel = cancel
        self._last_pause = time.perf_counter()
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._interrupting = False
        self._awaiting = False  # in an await that interrupt may cancel

    def attach(self) -> None:
        """Called by the run on its task, so ``interrupt`` can reach whatever it awaits."""
        self._task = asyncio.current_task()
        self._loop = asyncio.get_running_loop()

    def interrupt(self) -> None:
        """From ``Agent.cancel`` (any thread): set the event, and cancel the run's current
        await (an async tool, the LLM call) so the run does not wait for it to finish."""
        self._cancel.set()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._interrupt_task)

    def _interrupt_task(self) -> None:
        if self._awaiting and self._task is not None and not self._task.done():
            self._interrupting = True
            self._task.cancel()

    def take_interrupt(self) -> bool:
        """True when the CancelledError being handled came from ``interrupt``; the task's
        cancellation is then withdrawn, since the run ends with AgentCancelledError."""
        if not self._interrupting or self._task is None:
            return False
        self._interrupting = False
        self._task.uncancel()
        return True

    async def call_tool(self, tool: Tool, value: Empty, messages: list[Message]) -> Any:
        if tool.afunc is not None:  # the tool's own async body, e.g. on an async client
            return await self._interruptible(tool.afunc(value, messages))
        if tool.is_async:
            return await self._interruptible(tool.func(value, messages))
        # A thread cannot be interrupted: cancel() lets it finish, keeps its result, and the
        # run stops before the next step, as in a sync run.
        return await in_worker_thread(
            lambda: tool.func(value, messages), on_cancel=self._cancel.set
        )

    async def _interruptible(self, awaitable: Awaitable[T]) -> T:
        self._awaiting = True
        try:
            return await awaitable
        finally:
            self._awaiting = False

    async def complete(
        self,
        endpoint: EndpointLike,
        records: Sequence[ProviderRecord],
        on_delta: DeltaCallback | None,
    ) -> Completion:
        acomplete = getattr(endpoint, "acomplete", None)
        if acomplete is None:  # a sync-only endpoint
            return await complete_in_thread(
                endpoint, records, on_delta=on_delta, cancel=self._cancel
            )
        return await self._interruptible(acomplete(records, on_delta=on_delta, cancel=self._cancel))

    async def pause(self) -> None:
        now = time.perf_counter()
        if now - self._last_pause > _YIELD_EVERY_S:
            await asyncio.sleep(0)
            self._last_pause = time.perf_counter()

    def close(self) -> None:
        self._task = None


Driver = SyncDriver | AsyncDriver
DriverFactory = Callable[[threading.Event], Driver]
"""Makes a run's driver from its cancel event: a driver class, or e.g. a durable run's own."""


class _LoopThread:
    """A private event loop on its own thread, for the async parts of a sync run."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="roboz-agent-loop", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        loop.run_forever()
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()

    def run(self, start: Callable[[], Awaitable[T]], cancel: threading.Event) -> T:
        async def main() -> T:
            return await start()

        # The coroutine is created on the loop's thread but keeps the caller's context
        # variables: run_coroutine_threadsafe copies them when it schedules the task.
        future = asyncio.run_coroutine_threadsafe(main(), self._loop)
        while True:
            done, _ = concurrent.futures.wait([future], timeout=_CANCEL_POLL_S)
            if done:
                return future.result()
            if cancel.is_set():
                future.cancel()
                concurrent.futures.wait([future])
                return future.result()  # raises CancelledError unless it finished first

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
