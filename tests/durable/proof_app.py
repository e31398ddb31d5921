"""The agent of the proof (``roboz worker --app tests.durable.proof_app:runs``).

Each turn calls ``effect`` ``STEPS`` times, then stops. The endpoint answers from the
conversation alone, so a resumed turn replays the same way on any worker. What the test
checks afterwards lives in schema ``proof`` of the same database:

- ``attempts``: every execution of an ``effect`` step, re-runs included;
- ``effects``: the external effect, made idempotent by ``idempotency_key()`` the way an
  outside service would (added only when no row has that key; no unique constraint, so a
  re-run under another key would show up as a second effect);
- ``inflight``: the first ``effect`` of the turn named by ``ROBOZ_TEST_HOLD`` writes its
  pid here on its first attempt and then sleeps, for the test to kill that worker;
- ``turns``: when each LLM call of a turn started and, for the one that stops the turn,
  ended (re-runs included), to show that turns of a thread never overlapped.

The effect talks to PostgreSQL itself, like any client of an outside service, retrying with
backoff while the server is away.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from dbos import DBOS

from roboz import Agent, tool
from roboz.durable import DurableRuns, idempotency_key
from roboz.llm import FunctionEndpoint, ProviderRecord
from roboz.models import Empty, Message
from roboz.tools import stop

URL = os.environ.get("ROBOZ_DURABLE_URL", "")
STEPS = 2
STEP_SECONDS = float(os.environ.get("ROBOZ_TEST_STEP_SECONDS", "0.02"))
T = TypeVar("T")

SCHEMA = """
CREATE SCHEMA IF NOT EXISTS proof;
CREATE TABLE proof.attempts (
    key TEXT NOT NULL, executor TEXT NOT NULL, pid INTEGER NOT NULL,
    at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());
CREATE TABLE proof.effects (
    key TEXT NOT NULL, executor TEXT NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());
CREATE TABLE proof.inflight (
    workflow_id TEXT PRIMARY KEY, key TEXT NOT NULL, executor TEXT NOT NULL, pid INTEGER NOT NULL);
CREATE TABLE proof.turns (
    workflow_id TEXT NOT NULL, event TEXT NOT NULL, executor TEXT NOT NULL,
    at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())
"""


def _retrying(work: Callable[[psycopg.Connection[Any]], T]) -> T:
    delay = 0.05
    while True:
        try:
            with psycopg.connect(URL, autocommit=True, connect_timeout=5) as conn:
                return work(conn)
        except psycopg.OperationalError:
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def _executor() -> str:
    return runs.executor_id or "?"


class Step(Empty):
    n: int


class Done(Empty):
    n: int
    key: str


@tool
def effect(input: Step, messages: list[Message]) -> Done:
    """Do step n, with an effect outside."""
    key = idempotency_key()
    workflow_id = key.rsplit(":", 1)[0]
    me, pid = _executor(), os.getpid()

    def attempt(conn: psycopg.Connection[Any]) -> bool:
        conn.execute(
            "INSERT INTO proof.attempts (key, executor, pid) VALUES (%s, %s, %s)", (key, me, pid)
        )
        if workflow_id != os.environ.get("ROBOZ_TEST_HOLD"):
            return False
        held = conn.execute(
            "INSERT INTO proof.inflight (workflow_id, key, executor, pid)"
            " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
            (workflow_id, key, me, pid),
        ).fetchone()
        return held is not None

    if _retrying(attempt):
        time.sleep(120)  # in flight until the test kills this worker
    time.sleep(STEP_SECONDS)

    def record(conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (key,))
            conn.execute(
                "INSERT INTO proof.effects (key, executor) SELECT %s, %s"
                " WHERE NOT EXISTS (SELECT 1 FROM proof.effects WHERE key = %s)",
                (key, me, key),
            )

    _retrying(record)
    return Done(n=input.n, key=key)


def _turn_event(event: str) -> None:
    workflow_id = DBOS.workflow_id or "?"
    _retrying(
        lambda conn: conn.execute(
            "INSERT INTO proof.turns (workflow_id, event, executor) VALUES (%s, %s, %s)",
            (workflow_id, event, _executor()),
        )
    )


def reply(records: list[ProviderRecord]) -> dict[str, object]:
    """Call ``effect`` STEPS times after the turn's user message, then stop."""
    _turn_event("llm")
    users = [i for i, r in enumerate(records) if r["role"] == "user" and "] " not in r["content"]]
    since = records[users[-1] if users else 0 :]
    done = sum(1 for r in since if r["role"] != "assistant" and '"key"' in r["content"])
    if done < STEPS:
        return {"action": "effect", "n": done}
    _turn_event("end")
    return {"action": "stop", "value": f"did {done} steps"}


prover = Agent(name="prover", agent_endpoint=FunctionEndpoint(reply), tools=[effect, stop])

runs = DurableRuns(URL, agents=[prover], queue="proof", polling_interval_s=0.05)
