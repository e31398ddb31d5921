"""Blocking work from async code: run it on a worker thread, and never abandon it running.

A thread cannot be interrupted, so when the awaiting task is cancelled the work is told so
(``on_cancel``, e.g. setting a cancel event the work watches) and then waited for: nothing
keeps running after the cancelled await has returned.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


async def in_worker_thread(
    func: Callable[[], T], *, on_cancel: Callable[[], None] | None = None
) -> T:
    """``func()`` on the loop's default executor, with the caller's context variables."""
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(None, contextvars.copy_context().run, func)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        if on_cancel is not None:
            on_cancel()
        while not future.done():
            try:
                await asyncio.wait({future})
            except asyncio.CancelledError:
                continue  # cancelled again: still wait, the thread is still running
        if not future.cancelled():
            future.exception()  # retrieved: the cancellation is what the caller sees
        raise
