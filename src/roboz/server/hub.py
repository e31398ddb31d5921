"""The streaming layer: who is told that a thread changed, and the deltas they are sent.

Every write this process makes to a thread (a turn's messages, a reply streaming in, a status)
calls :meth:`ThreadHub.changed`, from the event loop or from a worker thread; a feed from
other processes (PostgreSQL LISTEN/NOTIFY, ``pg_feed``) calls it too. Streams of one thread
at the same token share one read and one JSON encoding per change (``encoded_delta``), so a
change costs one store read however many clients watch it. Two kinds of stream listen:

- SSE streams (``sse.Stream``, attached with :meth:`ThreadHub.attach`) send every client the
  same bytes, so the hub pushes them: on a change it reads the delta once per token held and
  writes the event to each stream in turn, in one callback (no task wakes per client). A
  tick every ``keepalive_s`` writes a comment to each and reads every watched thread again,
  so writes no server was told of (another process over a SQLite file) still arrive.
- A stream that translates each delta for its client (AG-UI) waits on a
  :class:`Subscription`, then reads ``encoded_delta`` from the token it last sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from roboz.server.errors import mapped
from roboz.server.sse import Stream
from roboz.threads import AgentThreadDelta, api_delta

DeltaReader = Callable[[str, str | None], AgentThreadDelta]
"""``delta_since`` of the store (as the caller may read it)."""


def sse_event(event: str, data: str, event_id: str | None = None) -> bytes:
    """One Server-Sent Event; ``data`` is one line of JSON (no newlines to split)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {data}\n\n".encode()


def is_empty(delta: AgentThreadDelta) -> bool:
    return not delta.messages_by_idx and all(
        value is None
        for value in (
            delta.reset_from_message_sequence_num,
            delta.status,
            delta.title,
            delta.tasks,
            delta.goals,
        )
    )


@dataclass
class EncodedDelta:
    """A delta read once for every stream at one token: its SSE event (None when nothing
    changed) and the token after it."""

    event: bytes | None
    token: str
    delta: AgentThreadDelta


@dataclass
class _Topic:
    version: int = 0
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    subscribers: int = 0
    deltas: dict[str | None, asyncio.Future[EncodedDelta]] = field(
        default_factory=dict[str | None, "asyncio.Future[EncodedDelta]"]
    )
    streams: dict[Stream, None] = field(default_factory=dict[Stream, None])
    """The SSE streams of the thread, in the order they attached."""
    pushing: bool = False
    """A push to the streams is scheduled."""


class Subscription:
    """One stream's interest in one thread; ``wait`` returns once it changed (or the hub
    closes), ``close`` when the stream ends."""

    def __init__(self, hub: ThreadHub, thread_id: str, topic: _Topic) -> None:
        self.hub = hub
        self.thread_id = thread_id
        self._topic = topic
        self.seen = topic.version

    def mark(self) -> None:
        """Everything up to now is about to be read: wait for changes after this."""
        self.seen = self._topic.version

    async def wait(self, timeout: float | None) -> bool:
        """True when the thread changed since :meth:`mark`, False on timeout."""
        topic = self._topic
        if topic.version != self.seen or self.hub.closed:
            return True
        try:
            await asyncio.wait_for(topic.wake.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def close(self) -> None:
        self.hub.unsubscribe(self.thread_id, self._topic)


class ThreadHub:
    """Change notifications and shared delta reads for the streams of one process.

    ``read`` is the store's ``delta_since`` (streams were checked against the caller's
    visibility when they opened); SSE streams get a comment and a fresh read every
    ``keepalive_s`` seconds."""

    def __init__(self, read: DeltaReader | None = None, keepalive_s: float = 15.0) -> None:
        self._topics: dict[str, _Topic] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._read = read
        self._keepalive_s = keepalive_s
        self._ticking: asyncio.TimerHandle | None = None
        self.closed = False
        self.listeners: list[Callable[[str], None]] = []
        """Called (on the loop) with each thread id this process changed: the feed that tells
        other processes."""

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Run on ``loop`` (the server's); changes from other threads are handed to it."""
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self.closed = False
        if self._read is not None:
            self._ticking = loop.call_later(self._keepalive_s, self._tick)

    def subscribe(self, thread_id: str) -> Subscription:
        topic = self._topics.get(thread_id)
        if topic is None:
            topic = self._topics[thread_id] = _Topic()
        topic.subscribers += 1
        return Subscription(self, thread_id, topic)

    def unsubscribe(self, thread_id: str, topic: _Topic) -> None:
        topic.subscribers -= 1
        if topic.subscribers <= 0 and self._topics.get(thread_id) is topic:
            del self._topics[thread_id]

    def changed(self, thread_id: str, *, local: bool = True) -> None:
        """``thread_id`` changed (callable from any thread); ``local``: by this process, so
        the listeners (other processes' feed) hear of it too."""
        loop = self._loop
        if loop is None:
            return
        if threading.get_ident() == self._loop_thread:
            self._changed(thread_id, local)
        else:
            # A closed loop raises RuntimeError: nobody is streaming any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._changed, thread_id, local)

    def _changed(self, thread_id: str, local: bool) -> None:
        topic = self._topics.get(thread_id)
        if topic is not None:
            topic.version += 1
            topic.deltas = {}
            topic.wake.set()
            topic.wake = asyncio.Event()
            self._schedule(thread_id, topic)
        if local:
            for listener in self.listeners:
                listener(thread_id)

    # -- SSE streams: pushed to ----------------------------------------------------------------

    def attach(self, stream: Stream) -> Stream:
        """``stream`` (holding the token of the last delta it was sent) gets every change of
        its thread from now on; it is read for at once, so a change made since that delta is
        not missed."""
        if self.closed or self._read is None:
            stream.finish()
            return stream
        topic = self._topics.get(stream.thread_id)
        if topic is None:
            topic = self._topics[stream.thread_id] = _Topic()
        topic.subscribers += 1
        topic.streams[stream] = None
        self._schedule(stream.thread_id, topic)
        return stream

    def detach(self, stream: Stream) -> None:
        topic = self._topics.get(stream.thread_id)
        if topic is not None and stream in topic.streams:
            del topic.streams[stream]
            self.unsubscribe(stream.thread_id, topic)

    def _schedule(self, thread_id: str, topic: _Topic) -> None:
        # Every write of one loop iteration (a burst of them) costs one push.
        if topic.streams and not topic.pushing and self._loop is not None:
            topic.pushing = True
            self._loop.call_soon(self._push, thread_id, topic)

    def _push(self, thread_id: str, topic: _Topic) -> None:
        topic.pushing = False
        if self.closed or not topic.streams:
            return
        by_token: dict[str, list[Stream]] = {}
        for stream in topic.streams:
            if not stream.closed:
                by_token.setdefault(stream.token, []).append(stream)
        for token, streams in by_token.items():
            try:
                encoded = self._encoded(topic, thread_id, token)
            except Exception as error:
                status, code = mapped(error) or (500, "internal_error")
                body = {"error": {"code": code, "message": str(error), "status": status}}
                ending = sse_event("error", json.dumps(body))
                for stream in streams:
                    stream.finish(ending)
                continue
            if encoded.event is not None:
                for stream in streams:
                    stream.write(encoded.event)
            for stream in streams:
                stream.token = encoded.token

    def _tick(self) -> None:
        if self.closed or self._loop is None:
            return
        for thread_id, topic in list(self._topics.items()):
            if topic.streams:
                for stream in topic.streams:
                    stream.write(b": keepalive\n\n")
                topic.deltas = {}  # read again: a write no server was told of
                self._schedule(thread_id, topic)
        self._ticking = self._loop.call_later(self._keepalive_s, self._tick)

    def _encoded(self, topic: _Topic, thread_id: str, token: str | None) -> EncodedDelta:
        """The delta after ``token``, read and encoded once per change (shared with the
        streams that wait on subscriptions)."""
        pending = topic.deltas.get(token)
        if pending is not None and pending.done():
            return pending.result()
        assert self._read is not None
        delta = api_delta(self._read(thread_id, token))
        event = None
        if not is_empty(delta):
            event = sse_event("delta", delta.model_dump_json(), delta.continuation_token)
        result = EncodedDelta(event, delta.continuation_token, delta)
        if pending is None:
            future: asyncio.Future[EncodedDelta] = asyncio.get_running_loop().create_future()
            future.set_result(result)
            topic.deltas[token] = future
        return result

    def wake_all(self) -> None:
        """Every stream re-reads its thread (after the feed from other processes was cut
        off, so changes in the gap are not missed). Call on the loop."""
        for thread_id in list(self._topics):
            self._changed(thread_id, False)

    def close(self) -> None:
        """End every stream (the server is shutting down)."""
        self.closed = True
        if self._ticking is not None:
            self._ticking.cancel()
        for topic in self._topics.values():
            topic.wake.set()
            for stream in list(topic.streams):
                stream.finish()

    async def encoded_delta(
        self, subscription: Subscription, token: str | None, read: DeltaReader
    ) -> EncodedDelta:
        """The delta after ``token`` as an SSE event, read once for every stream of the
        thread that holds the same token at the same version."""
        topic = subscription._topic  # pyright: ignore[reportPrivateUsage]
        pending = topic.deltas.get(token)
        if pending is not None:
            if pending.done():  # the common case with many streams: read by the first
                return pending.result()
            return await asyncio.shield(pending)
        future: asyncio.Future[EncodedDelta] = asyncio.get_running_loop().create_future()
        topic.deltas[token] = future
        try:
            delta = api_delta(read(subscription.thread_id, token))
            event = None
            if not is_empty(delta):
                event = sse_event("delta", delta.model_dump_json(), delta.continuation_token)
            result = EncodedDelta(event, delta.continuation_token, delta)
        except BaseException as error:
            if topic.deltas.get(token) is future:
                del topic.deltas[token]
            future.set_exception(error)
            future.exception()  # retrieved: streams waiting on it re-raise it themselves
            raise
        future.set_result(result)
        return result
