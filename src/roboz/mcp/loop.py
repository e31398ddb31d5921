"""A private asyncio loop on a daemon thread, so synchronous agent code can use the async SDK.

The MCP session is bound to the loop that opened it; every call goes through this one loop,
whichever thread (or outer event loop) the agent runs on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """Starts on first use; ``stop`` ends the loop after the coroutine it is given."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def main() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()
                    _drain(loop)
                    loop.close()

                thread = threading.Thread(target=main, name=self._name, daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    @property
    def running(self) -> bool:
        return self._loop is not None

    def in_loop(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._ensure())

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
        """Run ``coro`` on the loop and wait; on timeout it is cancelled and TimeoutError
        raised."""
        if self.in_loop():
            coro.close()
            raise RuntimeError("a blocking MCP call was made from the MCP loop itself")
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError from None

    def stop(self, last: Coroutine[Any, Any, Any] | None, timeout: float) -> None:
        """Run ``last`` (a shutdown), then end the loop and its thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            if last is not None:
                last.close()
            return
        if last is not None and threading.current_thread() is not thread:
            future = asyncio.run_coroutine_threadsafe(last, loop)
            try:
                future.result(timeout)
            except Exception:  # the shutdown is best effort; the process group goes below
                future.cancel()
        elif last is not None:
            last.close()
        loop.call_soon_threadsafe(loop.stop)
        if threading.current_thread() is not thread:
            thread.join(timeout)


def _drain(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is left and run the callbacks already scheduled (a child's transport
    reports its end through one), so nothing touches the loop after it is closed."""
    leftover = asyncio.all_tasks(loop)
    for task in leftover:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.run_until_complete(asyncio.sleep(0))
