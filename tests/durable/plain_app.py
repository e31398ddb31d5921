"""A plain DBOS app for the worker tests (``--app tests.durable.plain_app:runs``): one queue and
one workflow whose steps each record an effect keyed by ``workflow_id:step_id``.

The database comes from ``ROBOZ_DURABLE_URL``. Tables in schema ``proof``:

- ``attempts``: every execution of a step (its key, the executor, the pid), including the
  re-runs after a crash;
- ``effects``: the external effect, made idempotent by its key the way an external service
  would (a row is added only if none with that key exists), with no unique constraint, so a
  step that re-ran under a *different* key would show up as a second effect;
- ``inflight``: the first step of a run named in ``ROBOZ_TEST_HOLD`` writes here and then
  sleeps on its first attempt, so a test knows which process to kill while that step is in
  flight.
"""

from __future__ import annotations

import os
import time
from typing import Any

import psycopg
from dbos import DBOS

from roboz.durable._urls import sqlalchemy_url

QUEUE = "plain"
STEP_SECONDS = float(os.environ.get("ROBOZ_TEST_STEP_SECONDS", "0.05"))

SCHEMA = """
CREATE SCHEMA IF NOT EXISTS proof;
CREATE TABLE IF NOT EXISTS proof.attempts (
    key TEXT NOT NULL, executor TEXT NOT NULL, pid INTEGER NOT NULL,
    at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS proof.effects (
    key TEXT NOT NULL, executor TEXT NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS proof.inflight (
    run_id TEXT PRIMARY KEY, key TEXT NOT NULL, executor TEXT NOT NULL, pid INTEGER NOT NULL)
"""


class PlainRuns:
    """Shaped as :class:`roboz.durable.DurableRuns` is, for the worker."""

    def __init__(self, url: str, queue: str = QUEUE, application_version: str = "test-1") -> None:
        self.url = url
        self.queue = queue
        self.application_version = application_version
        self.worker_concurrency: int | None = 8
        self.executor_id = ""

    def launch(self, *, executor_id: str) -> None:
        self.executor_id = executor_id
        DBOS(
            config={
                "name": "roboz-worker-test",
                "system_database_url": sqlalchemy_url(self.url),
                "executor_id": executor_id,
                "application_version": self.application_version,
                "log_level": "WARNING",
            }
        )
        DBOS.launch()
        DBOS.register_queue(
            self.queue, worker_concurrency=self.worker_concurrency, polling_interval_sec=0.1
        )

    def shutdown(self) -> None:
        DBOS.destroy()


runs = PlainRuns(os.environ.get("ROBOZ_DURABLE_URL", ""))


def _connect() -> psycopg.Connection[Any]:
    return psycopg.connect(runs.url, autocommit=True)


@DBOS.workflow()
def plain_run(run_id: str, steps: int) -> str:
    for index in range(steps):
        effect(run_id, index)
    return run_id


@DBOS.step(retries_allowed=True, max_attempts=20, interval_seconds=0.5, backoff_rate=1.5)
def effect(run_id: str, index: int) -> None:
    key = f"{DBOS.workflow_id}:{DBOS.step_id}"
    me, pid = runs.executor_id, os.getpid()
    with _connect() as conn:
        conn.execute(
            "INSERT INTO proof.attempts (key, executor, pid) VALUES (%s, %s, %s)", (key, me, pid)
        )
        if run_id in os.environ.get("ROBOZ_TEST_HOLD", "").split(","):
            held = conn.execute(
                "INSERT INTO proof.inflight (run_id, key, executor, pid) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT DO NOTHING RETURNING 1",
                (run_id, key, me, pid),
            ).fetchone()
            if held:  # the run's first step, the first time only
                time.sleep(120)  # until killed
        time.sleep(STEP_SECONDS)
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (key,))
            conn.execute(
                "INSERT INTO proof.effects (key, executor) SELECT %s, %s"
                " WHERE NOT EXISTS (SELECT 1 FROM proof.effects WHERE key = %s)",
                (key, me, key),
            )
