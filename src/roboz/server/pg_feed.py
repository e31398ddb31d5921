"""Many ``roboz serve`` processes over one PostgreSQL store: LISTEN/NOTIFY between them.

Each server NOTIFYs a channel of the store's schema after it writes a thread (coalesced:
one notice per thread per wake-up of the publisher) and when it passes on a cancel; each
LISTENs there and wakes its own streams of that thread, or cancels the turn it runs. A
server ignores its own notices (it already woke its streams). Durable turns, which
``roboz worker`` processes run, announce their writes on the same channel from inside each
write's transaction (``roboz.threads.postgres.notify_changed``). Notices are a wake-up only:
what a stream sends is always read from the store, so a lost or late notice delays a delta,
never changes it, and after the listening connection is lost and made again every stream
re-reads its thread.

Both connections are plain psycopg connections on threads of their own, so the event loop
never waits on the network for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import uuid
from typing import Any, cast

from roboz.server.state import ServerState
from roboz.threads.postgres import change_channel

log = logging.getLogger("roboz.server.feed")


class PostgresFeed:
    """Tells the other servers of ``store``'s database what this one changed, and this one
    what they changed."""

    def __init__(self, store: Any, state: ServerState) -> None:
        self.url: str = store.url
        self.channel = change_channel(store.schema)
        self.state = state
        self.instance = uuid.uuid4().hex[:16]
        self._stop = threading.Event()
        self._pending: set[tuple[str, str]] = set()
        self._pending_lock = threading.Lock()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listening = threading.Event()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop.clear()
        self.state.hub.listeners.append(self.changed)
        self.state.remote_cancel = self.cancel
        for target, name in ((self._listen, "listen"), (self._publish, "publish")):
            thread = threading.Thread(target=target, name=f"roboz-feed-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        # Listening before the first request: a write by another server right after this
        # server answered a stream's first read must not be missed.
        await asyncio.to_thread(self._listening.wait, 10)

    async def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            await asyncio.to_thread(thread.join, 5)
        self._threads.clear()

    # -- out ----------------------------------------------------------------------------------

    def changed(self, thread_id: str) -> None:
        self._queue("d", thread_id)

    def cancel(self, thread_id: str) -> None:
        self._queue("c", thread_id)

    def _queue(self, kind: str, thread_id: str) -> None:
        with self._pending_lock:
            self._pending.add((kind, thread_id))
        self._wake.set()

    def _publish(self) -> None:
        import psycopg

        conn: psycopg.Connection[Any] | None = None
        while not self._stop.is_set():
            self._wake.wait(1.0)
            self._wake.clear()
            with self._pending_lock:
                batch, self._pending = self._pending, set()
            if not batch:
                continue
            try:
                if conn is None or conn.closed or conn.broken:
                    conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
                with conn.transaction():
                    for kind, thread_id in sorted(batch):
                        payload = f"{self.instance} {kind} {thread_id}"
                        conn.execute("SELECT pg_notify(%s, %s)", (self.channel, payload))
            except psycopg.Error as error:
                log.warning("cannot notify the other servers: %s", error)
                if conn is not None:
                    conn.close()
                conn = None
                self._stop.wait(1.0)
        if conn is not None:
            conn.close()

    # -- in -----------------------------------------------------------------------------------

    def _listen(self) -> None:
        import psycopg

        first = True
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
                    # The channel is made of a checked schema name (see change_channel).
                    conn.execute(cast(Any, f'LISTEN "{self.channel}"'))
                    self._listening.set()
                    if not first:
                        self._call(self.state.hub.wake_all)
                    first = False
                    while not self._stop.is_set():
                        for notice in conn.notifies(timeout=0.5):
                            self._heard(notice.payload)
            except psycopg.Error as error:
                log.warning("lost the other servers' notices, reconnecting: %s", error)
                self._stop.wait(1.0)

    def _heard(self, payload: str) -> None:
        instance, _, rest = payload.partition(" ")
        kind, _, thread_id = rest.partition(" ")
        if instance == self.instance or not thread_id:
            return
        if kind == "d":
            self.state.hub.changed(thread_id, local=False)
        elif kind == "c":
            self._call(lambda: self.state.turns.cancel(thread_id))

    def _call(self, function: Any) -> None:
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(function)
