"""``stream`` and ``astream``: a run's events as an iterator, while the run goes on.

Both subscribe a queue to the run's own pipe (so every event of the run arrives, including
those tools emit on the pipe themselves, and none of another run of the same agent) and end
with the run: the
last event is AgentFinished (its ``output`` is the result) or AgentFailed, after which the
run's error is raised. Leaving early (closing the iterator, or cancelling the task that
reads it) cancels the run and waits for it, so no task or thread is left behind.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from roboz.runtime.events import Event, Sink

if TYPE_CHECKING:
    from roboz.agent.session import AgentRun

_END = object()


async def astream_run(run: AgentRun) -> AsyncIterator[Event]:
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()
    events: asyncio.Queue[Any] = asyncio.Queue()

    def sink(event: Event) -> None:
        # Sync tools run on worker threads and emit there.
        if threading.get_ident() == loop_thread:
            events.put_nowait(event)
        else:
            loop.call_soon_threadsafe(events.put_nowait, event)

    unsubscribe = run.pipe.subscribe(sink)
    task = asyncio.ensure_future(run.run_async())
    task.add_done_callback(lambda _: events.put_nowait(_END))
    try:
        while (event := await events.get()) is not _END:
            yield event
        await task  # the run's error, if it failed
    finally:
        unsubscribe()
        if not task.done():
            task.cancel()
            while not task.done():
                try:
                    await asyncio.wait({task})
                except asyncio.CancelledError:
                    continue
        if task.done() and not task.cancelled():
            task.exception()  # retrieved, so it is not reported as never retrieved


def stream_run(run: AgentRun) -> Iterator[Event]:
    events: queue.SimpleQueue[Any] = queue.SimpleQueue()
    failure: list[BaseException] = []
    sink: Sink = events.put

    def work() -> None:
        try:
            run.run_sync()
        except BaseException as error:
            failure.append(error)
        finally:
            events.put(_END)

    unsubscribe = run.pipe.subscribe(sink)
    worker = threading.Thread(
        target=contextvars.copy_context().run, args=(work,), name="roboz-agent-stream", daemon=True
    )
    worker.start()
    try:
        while (event := events.get()) is not _END:
            yield event
        if failure:
            raise failure[0]
    finally:
        unsubscribe()
        if worker.is_alive():
            run.cancel()
            worker.join()
