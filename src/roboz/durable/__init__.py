"""Durable agent runs: each turn of a thread is a DBOS workflow whose state lives in PostgreSQL.

Install ``roboz[durable]`` (DBOS 3 and psycopg 3) and prepare the database once::

    roboz threads migrate --url postgresql://roboz@db/roboz   # threads + DBOS tables

A worker process serves agents (``DurableRuns.launch``); anything else enqueues turns with a
:class:`DurableClient` and follows them through a :class:`RunHandle`::

    runs = DurableRuns(url, agents=[helper], application_version="2026-12-01")
    runs.launch(executor_id="host-a:roboz:0")      # a worker, e.g. under `roboz worker`

    client = DurableClient(url)
    handle = client.enqueue("helper", "summarize my inbox", thread_id="t1", turn=7)
    handle.result(timeout=120).output              # the turn's Stop
    client.retrieve("t1/7").cancel()               # from anywhere: stop it at its next step

What durability means here, part by part:

- A turn is one DBOS workflow, id ``"<thread_id>/<turn>"`` (``client``); enqueueing the same
  id again returns the existing run, with a different input it raises WorkflowConflictError.
- Every LLM call (each repair attempt too) and every tool call is a recorded step
  (``driver``); a resumed turn replays recorded results and continues where it stopped.
  Steps are at least once: a step in flight when its worker died runs again. Tools with
  external effects pass :func:`idempotency_key` (``"<workflow_id>:<step_id>"``) to the
  other side so the effect happens once; ``@tool(pure=True)`` tools run inline, no step.
- Thread writes are exactly once (``conversation``): each batch of messages goes to sequence
  numbers fixed by the turn, inserted only if absent; the turn's first and last batches (and
  the one before ``ask_user``) are DBOS datasource transactions, the rows and the step's
  record committed together; the batch a tool step writes as it begins is part of that step
  (``step_writes``). The conversation a turn works on is the one recorded by its first step,
  never the thread re-read on resume. Each write also NOTIFYs the thread store's channel
  inside its transaction, so ``roboz serve`` streams see a durable turn as it goes.
- ``ask_user`` waits durably (DBOS ``set_event``/``recv``): ``RunHandle.question()`` and
  ``RunHandle.answer(text)`` (``workflow``).
- ``RunHandle.cancel()`` stops a turn at its next step and ends its thread as a cancelled
  run (``cancel``); ``DurableClient.cancel_thread`` cancels whatever turn a thread runs
  (the one its marker names, and any queued). ``enqueue(..., goals=...)`` gives a turn
  goals, and its task list and goals are written with its messages
  (``workflow.DurableTurn``); ``scope=`` and ``viewing_context=`` reach it as in
  ``Agent.invoke``; ``client_tools=`` end a turn waiting for the client, and
  ``DurableClient.submit_tool_results`` continues it as a new turn (``waiting``).
- The queue is partitioned by thread with one turn per thread at a time; ``worker_concurrency``
  and ``concurrency`` bound turns per worker and overall (``runs``).
- A database that is unreachable, lacks the schema, or has a newer one is refused in one
  line naming the server and what to run (``schema``); :func:`migrate` prepares it.

DBOS is one runtime per process: launch one DurableRuns per process.
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("dbos") is None:  # pragma: no cover - installed with the extra
    raise ImportError("roboz.durable needs DBOS: pip install 'roboz[durable]'")

from roboz.durable.client import Cancelled, DurableClient, RunHandle, workflow_id
from roboz.durable.driver import StepFailedError
from roboz.durable.errors import (
    DurableError,
    DurableSchemaError,
    TurnCancelledError,
    WorkflowConflictError,
)
from roboz.durable.keys import idempotency_key
from roboz.durable.runs import DurableRuns
from roboz.durable.schema import migrate
from roboz.durable.workflow import Question, TurnFailedError, TurnResult

__all__ = [
    "Cancelled",
    "DurableClient",
    "DurableError",
    "DurableRuns",
    "DurableSchemaError",
    "Question",
    "RunHandle",
    "StepFailedError",
    "TurnCancelledError",
    "TurnFailedError",
    "TurnResult",
    "WorkflowConflictError",
    "idempotency_key",
    "migrate",
    "workflow_id",
]
