"""Thread writes made inside a step: a transaction of their own, not a step of their own.

A turn shows its progress by writing its new messages to the thread as each tool step
begins (``DurableDriver``). That write used to be a recorded step before the tool step, a
DBOS datasource transaction (its record looked up, then written with the rows, the workflow's
ownership checked): as dear as the tool step itself. Made inside the tool step, it needs no
record, the step is one: if the step is recorded, its write committed first; if the worker
dies before the step is recorded, the step runs again and so does the write, which is
idempotent (``roboz.threads.turn_rows``: each message at its fixed sequence number, inserted
only where absent; the task list and goals set to the same values). The writes that begin
and end a turn, or precede ``ask_user``, stay recorded datasource transactions.

Such a write (:func:`write_progress`) runs on a psycopg connection of this process whose
search path names the thread store's schema, in pipeline mode with its own BEGIN and COMMIT
(psycopg's transaction block would wait for each): six statements, the client waiting for the
server twice (the results, then the commit). A lost connection or a transient error
(serialization, deadlock) is retried with backoff, as DBOS retries its own transactions, so
an outage pauses the turn rather than failing it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

import psycopg
from dbos import DBOS

from roboz.durable import cancel
from roboz.durable.conversation import Row, Updated
from roboz.threads import turn_rows
from roboz.threads.postgres import check_schema_name, notify_changed

P = ParamSpec("P")
T = TypeVar("T")

_FIRST_WAIT_S = 0.01
_MAX_WAIT_S = 2.0


def in_step() -> bool:
    """Whether this code runs inside a DBOS step (not in the workflow's own code)."""
    return DBOS.step_id is not None


class StepWrites:
    """The connections of the writes made inside steps; one per step running at once."""

    def __init__(self, url: str, *, schema: str | None = None) -> None:
        """``schema``: the search path of the connections (set once per connection, where
        a transaction of the thread store's writer would otherwise set it each time)."""
        self.url = url
        self.schema = schema
        self._idle: list[psycopg.Connection[Any]] = []
        self._lock = threading.Lock()
        self._closed = False

    def run(self, body: Callable[Concatenate[Any, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``body(connection, *args, **kwargs)`` in one transaction; retried while the
        database is unreachable or the transaction must be run again."""
        wait = _FIRST_WAIT_S
        while True:
            try:
                conn = self._take()
            except psycopg.OperationalError:
                conn = None
            if conn is not None:
                try:
                    return self._transaction(conn, body, *args, **kwargs)
                except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected):
                    pass
                except psycopg.OperationalError:
                    if not conn.broken and not conn.closed:
                        raise  # the statement failed, not the connection
                finally:
                    self._give(conn)
            time.sleep(wait)
            wait = min(wait * 2, _MAX_WAIT_S)

    @staticmethod
    def _transaction(
        conn: psycopg.Connection[Any],
        body: Callable[Concatenate[Any, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        # BEGIN and COMMIT go out with the statements around them: the client waits for the
        # server only where it reads a result, and at the end.
        try:
            with conn.pipeline():
                conn.execute("BEGIN")
                result = body(conn, *args, **kwargs)
                conn.execute("COMMIT")
        except BaseException:
            if not conn.broken and not conn.closed:
                with contextlib.suppress(psycopg.Error):
                    conn.execute("ROLLBACK")  # harmless when nothing is open any more
            raise
        return result

    def close(self) -> None:
        """Close the idle connections; those in use close when given back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(Exception):
                conn.close()

    def _take(self) -> psycopg.Connection[Any]:
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed and not conn.broken:
                    return conn
        conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        if self.schema is not None:
            check_schema_name(self.schema)
            conn.execute("SELECT set_config('search_path', %s, false)", (f'"{self.schema}"',))
        return conn

    def _give(self, conn: psycopg.Connection[Any]) -> None:
        with self._lock:
            if not self._closed and not conn.closed and not conn.broken:
                self._idle.append(conn)
                return
        with contextlib.suppress(Exception):
            conn.close()


def write_progress(
    raw: psycopg.Connection[Any],
    schema: str,
    workflow_id: str,
    thread_id: str,
    rows: Sequence[Row],
    updated: Sequence[Updated] = (),
) -> int:
    """The rows a tool step writes as it begins (a ``StepWrites.run`` body whose connection's
    search path names ``schema``); returns how many were new. The turn's status held against
    a cancel, the thread's lock, the rows and the change notice go out together: the client
    waits for the server once for their results, once more for the commit. A cancelled turn
    writes nothing and raises DBOS's cancellation, whatever else the write met."""
    conn = turn_rows.connection(raw, None)
    check = cancel.hold(conn, workflow_id)
    notify_changed(raw, schema, thread_id)  # delivered when the rows commit, if they do
    try:
        count = turn_rows.write_rows(conn, thread_id, rows, updated)
    except turn_rows.TurnConflictError:
        check()
        raise
    check()
    return count


__all__ = ["StepWrites", "in_step", "write_progress"]
