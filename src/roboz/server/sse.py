"""The live SSE response: a raw ASGI writer that the hub pushes encoded events into.

A stream does not wait for changes in a task of its own. Once it has sent its first delta it
joins its thread's topic in the hub (:class:`Stream`), and when the thread changes the hub
reads the delta once and writes the same bytes to every stream at that token, one after the
other, in the callback that noticed the change: no task wakes per client, and each event is
encoded once however many clients watch.

A write is ``send`` of the ASGI server, started at once (:func:`eager`): it normally finishes
without waiting (the bytes go to the socket's buffer). When a client's socket is full it
waits; that client alone then continues in a task of its own, events queue behind the one in
flight, and a client so far behind that ``MAX_BACKLOG`` events queue up is ended: it
reconnects with ``Last-Event-ID`` and resumes exactly where it was, so nothing is lost and a
slow reader never holds up the others.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Awaitable, Generator
from typing import Any

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

RAW_SEND = "roboz.send"
"""Scope key of the ASGI server's own ``send`` (set by the application, before middleware
wraps it): events skip the layers that only look at a response's start."""

MAX_BACKLOG = 512
"""Events queued for one client whose socket is full before its stream is ended."""

HEAD = b"retry: 1000\n: connected\n\n"


class _Resumed:
    """The rest of an awaitable that waited when it was started by :func:`eager`."""

    __slots__ = ("_coro", "_waiting")

    def __init__(self, coro: Generator[Any, Any, Any], waiting: Any) -> None:
        self._coro = coro
        self._waiting = waiting

    def __await__(self) -> Generator[Any, Any, None]:
        # The task awaiting this drives ``coro`` from where it stopped: what ``coro`` yielded
        # (the future it waits on) goes up to the task, what the task sends back goes down.
        coro, waiting = self._coro, self._waiting
        while True:
            try:
                answer = yield waiting
            except BaseException as error:  # e.g. the task is cancelled: tell coro
                try:
                    waiting = coro.throw(error)
                except StopIteration:
                    return
            else:
                try:
                    waiting = coro.send(answer)
                except StopIteration:
                    return


def eager(awaitable: Awaitable[Any]) -> Awaitable[None] | None:
    """Run ``awaitable`` now, up to its first wait: None when it finished without waiting,
    else an awaitable of the rest. Its errors are raised here or from the awaitable."""
    steps = awaitable.__await__()
    try:
        waiting = steps.send(None)
    except StopIteration:
        return None
    return _Resumed(steps, waiting)


class Stream:
    """One client's live stream: where its events go, in order, and the token it holds."""

    __slots__ = ("_backlog", "_flushing", "_send", "closed", "ended", "thread_id", "token")

    def __init__(self, thread_id: str, send: Send, token: str) -> None:
        self.thread_id = thread_id
        self.token = token
        """The continuation token after the last event written to this stream."""
        self._send = send
        self._backlog: collections.deque[Message] = collections.deque()
        self._flushing: asyncio.Task[None] | None = None
        self.closed = False
        """No more writes: the last one (the end of the response) is written or queued."""
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        """Done once the response is over (its end written, or the client gone)."""

    def write(self, body: bytes) -> None:
        """Write ``body`` (whole events) after everything written before."""
        self._write({"type": "http.response.body", "body": body, "more_body": True})

    def finish(self, body: bytes = b"") -> None:
        """Write ``body`` and end the response."""
        self._write({"type": "http.response.body", "body": body, "more_body": False})

    def _write(self, message: Message) -> None:
        if self.closed:
            return
        if not message["more_body"]:
            self.closed = True
        if self._flushing is not None:
            if len(self._backlog) >= MAX_BACKLOG:
                # Too far behind: end it; the client resumes from the last event it read.
                self._backlog.clear()
                self.closed = True
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            self._backlog.append(message)
            return
        try:
            rest = eager(self._send(message))
        except Exception:
            self._gone()
            return
        if rest is not None:
            self._flushing = asyncio.ensure_future(self._flush(rest))
        elif self.closed:
            self._done()

    async def _flush(self, rest: Awaitable[None]) -> None:
        try:
            await rest
            while self._backlog:
                await self._send(self._backlog.popleft())
        except Exception:
            self._gone()
            return
        self._flushing = None
        if self.closed:
            self._done()

    def _gone(self) -> None:
        self.closed = True
        self._backlog.clear()
        self._done()

    def _done(self) -> None:
        if not self.ended.done():
            self.ended.set_result(None)

    def abandon(self) -> None:
        """The client went away: write nothing more."""
        self._gone()
        if self._flushing is not None:
            self._flushing.cancel()

    async def until_over(self, receive: Receive) -> None:
        """Wait until the response is over: ended by the hub, or the client disconnected."""
        listening = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait((listening, self.ended), return_when=asyncio.FIRST_COMPLETED)
        finally:
            listening.cancel()
            with contextlib.suppress(BaseException):
                await listening
        if not self.ended.done():
            self.abandon()
        elif self._flushing is not None:  # the end is still being written
            with contextlib.suppress(BaseException):
                await self._flushing


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class EventStream(Response):
    """The response of ``GET .../stream``: ``first`` (the SSE bytes of the first delta, or
    none) then whatever the hub pushes, until the client leaves or the hub ends it."""

    media_type = "text/event-stream"

    def __init__(self, hub: Any, thread_id: str, first: bytes, token: str) -> None:
        self.status_code = 200
        self.background = None
        self.raw_headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
        ]
        self._hub = hub
        self._thread_id = thread_id
        self._first = first
        self._token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": HEAD + self._first, "more_body": True})
        raw: Send = scope.get(RAW_SEND, send)
        stream = self._hub.attach(Stream(self._thread_id, raw, self._token))
        try:
            await stream.until_over(receive)
        finally:
            self._hub.detach(stream)


__all__ = ["RAW_SEND", "EventStream", "Stream", "eager"]
