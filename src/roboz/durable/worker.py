"""A worker process: launch the app's durable runs under a stable executor id, beat, recover
dead workers' runs, and shut down cleanly on SIGTERM or SIGINT.

``roboz worker`` (``roboz.cli.worker``) is this module's face; :class:`Worker` also serves a
program that wants a worker of its own.

The worker's loop ticks every ``watch_s`` (half a second at most): each tick watches the
other workers' locks (``WorkerRegistry.watch``), recovering a dead one as soon as it is due,
and every ``interval_s`` it also beats and looks for silent workers.

When its own session is lost, the next tick notices and reconnects at once, taking its lock
back well within the grace other workers give a freed lock. While PostgreSQL is unreachable
the worker takes no work (DBOS pauses every database call of its own, with backoff) and
retries with exponential backoff and jitter, capped at a third of the staleness period so
that, when the server is back, it beats again long before any other worker could call it
dead.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol

from roboz.durable.errors import DurableError, DurableSchemaError
from roboz.durable.recovery import ExecutorIdInUse, Fenced, Recovered, WorkerRegistry

log = logging.getLogger("roboz.durable.worker")

EXIT_OK = 0
EXIT_FENCED = 1


class Launchable(Protocol):
    """What a worker serves: :class:`roboz.durable.DurableRuns`, or anything shaped so."""

    url: str
    queue: str
    application_version: str

    def launch(self, *, executor_id: str) -> None: ...

    def shutdown(self) -> None: ...


def default_executor_id(queue: str, name: str = "0", host: str | None = None) -> str:
    """``HOST:QUEUE:NAME``: stable across restarts, so a worker restarted on the same host
    under the same name recovers its own runs as DBOS launches; unique as long as each
    worker of a host has its own name."""
    return f"{host or socket.gethostname()}:{queue}:{name}"


def resume_pending(executor_id: str) -> list[str]:
    """Resume every PENDING workflow of ``executor_id`` on its own queue (so it keeps its
    queue's partitioning and limits); returns their ids. Needs DBOS launched here."""
    from dbos import DBOS

    pending = DBOS.list_workflows(
        status="PENDING", executor_id=executor_id, load_input=False, load_output=False
    )
    for workflow in pending:
        DBOS.resume_workflow(workflow.workflow_id, queue_name=workflow.queue_name)
    return [workflow.workflow_id for workflow in pending]


class Backoff:
    """Exponential backoff with jitter: ``initial_s`` doubling up to ``cap_s``."""

    def __init__(self, initial_s: float, cap_s: float, rng: random.Random | None = None) -> None:
        self.initial_s = initial_s
        self.cap_s = max(cap_s, initial_s)
        self._rng = rng or random.Random()

    def delay(self, attempt: int) -> float:
        base = min(self.cap_s, self.initial_s * 2 ** max(0, attempt - 1))
        return base * (0.75 + 0.25 * self._rng.random())


class Worker:
    """One worker process on ``runs.queue``; :meth:`serve` blocks until told to stop."""

    def __init__(
        self,
        runs: Launchable,
        *,
        executor_id: str,
        schema: str = "roboz",
        interval_s: float = 5.0,
        stale_after_s: float = 30.0,
        watch_s: float = 0.5,
        on_recovered: Callable[[Recovered], None] | None = None,
    ) -> None:
        self.runs = runs
        self.executor_id = executor_id
        self.watch_s = min(watch_s, interval_s)
        self.registry = WorkerRegistry(
            runs.url,
            executor_id=executor_id,
            queue=runs.queue,
            application_version=runs.application_version,
            host=socket.gethostname(),
            pid=os.getpid(),
            schema=schema,
            interval_s=interval_s,
            stale_after_s=stale_after_s,
        )
        self.backoff = Backoff(min(1.0, interval_s), stale_after_s / 3)
        self.failed_beats = 0
        """Beats that failed in a row (PostgreSQL unreachable); 0 while all is well."""
        self._on_recovered = on_recovered
        self._stop = threading.Event()

    def stop(self) -> None:
        """Ask :meth:`serve` to return (what SIGTERM and SIGINT do); safe from any thread."""
        self._stop.set()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        log.info("worker %s: %s, shutting down", self.executor_id, signal.Signals(signum).name)
        self.stop()
        # A second signal is not patient: the default action ends the process.
        signal.signal(signum, signal.SIG_DFL)

    def serve(self, *, handle_signals: bool = True) -> int:
        """Register, launch, beat and recover until stopped; returns the exit code (0, or 1
        when fenced). Refuses to start with :class:`ExecutorIdInUse` or
        :class:`DurableSchemaError`."""
        previous: dict[int, Any] = {}
        if handle_signals:
            previous = {
                sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)
            }
        try:
            self.registry.register()
            try:
                self.runs.launch(executor_id=self.executor_id)
                log.info(
                    "worker %s serving queue %s of %s (application version %s; beat every "
                    "%.1f s, dead after %.1f s)",
                    self.executor_id,
                    self.runs.queue,
                    self.registry.where,
                    self.runs.application_version,
                    self.registry.interval_s,
                    self.registry.stale_after_s,
                )
                return self._loop()
            finally:
                try:
                    self.runs.shutdown()
                finally:
                    self.registry.mark_stopped()
                    self.registry.close()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _loop(self) -> int:
        import psycopg

        registry = self.registry
        wait = 0.0
        next_beat = 0.0
        while not self._stop.wait(wait):
            now = time.monotonic()
            beating = now >= next_beat
            try:
                if beating or not registry.connected:
                    registry.beat()  # reconnects first if the session was lost
                due = registry.watch()
                recovered = registry.recover_dead(resume_pending) if beating or due else []
            except (Fenced, ExecutorIdInUse) as error:
                # Cut off long enough for others to take over its runs, or its id: stop.
                log.error("%s", error)
                return EXIT_FENCED
            except (psycopg.OperationalError, DurableSchemaError) as error:
                self.failed_beats += 1
                # The first retry is at once: a session lost alone is back within the grace
                # others give a freed lock; backoff only once reconnecting failed.
                wait = 0.0 if self.failed_beats == 1 else self.backoff.delay(self.failed_beats - 1)
                next_beat = 0.0
                log.warning(
                    "worker %s: PostgreSQL unreachable (attempt %d): %s; retrying in %.1f s",
                    self.executor_id,
                    self.failed_beats,
                    _first_line(error),
                    wait,
                )
                continue
            if self.failed_beats:
                log.info(
                    "worker %s: PostgreSQL is back after %d failed attempts",
                    self.executor_id,
                    self.failed_beats,
                )
                self.failed_beats = 0
            for dead in recovered:
                log.warning(
                    "worker %s: worker %s (host %s, pid %d) %s, last beat %.1f s ago; resumed "
                    "its %d pending run(s)",
                    self.executor_id,
                    dead.executor_id,
                    dead.host,
                    dead.pid,
                    _WHY[dead.why],
                    dead.silent_s,
                    len(dead.workflow_ids),
                )
                if self._on_recovered is not None:
                    self._on_recovered(dead)
            if beating:
                next_beat = now + registry.interval_s
            wait = max(0.0, min(self.watch_s, next_beat - time.monotonic()))
        return EXIT_OK


_WHY = {
    "session ended": "lost its database session",
    "stopped": "stopped",
    "silent": "went silent",
}


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


__all__ = [
    "Backoff",
    "DurableError",
    "Launchable",
    "Worker",
    "default_executor_id",
    "resume_pending",
]
