"""``DurableClient``: enqueue turns and follow them without being a worker.

The client talks to DBOS's system tables only (``DBOSClient``): it runs no agent and needs no
agent objects, so a web server can enqueue turns that workers on other hosts run.

A turn's workflow id is ``"<thread_id>/<turn>"``. Pass ``turn`` (a number or any request id
of your own, e.g. the id of the HTTP request) to make a retried request safe: enqueueing the
same thread and turn again returns the run already there, and doing so with another agent or
input raises :class:`~roboz.durable.WorkflowConflictError`. Without ``turn`` the client
numbers the thread's turns itself (1, 2, ...), which a retry cannot recognize.

``ask_user`` reaches the client as a question on the run's handle::

    handle = client.enqueue("helper", "book me a table", thread_id="t1", turn=1)
    question = handle.question(timeout=30)     # Question(number=0, text="For how many?")
    handle.answer("four")                      # delivered once, even when sent twice
    handle.result(timeout=60)                  # TurnResult(..., output=Stop(...))
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from roboz.durable._urls import describe_server, redacted, sqlalchemy_url
from roboz.durable.errors import DurableError, TurnCancelledError, WorkflowConflictError
from roboz.durable.schema import DBOS_SCHEMA, check
from roboz.durable.workflow import (
    ANSWER_TOPIC,
    QUESTION_EVENT,
    WORKFLOW,
    CancelSignal,
    Question,
    TurnResult,
)
from roboz.threads import AgentGoal, ClientToolSpec

_THREAD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
_TURN = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


def workflow_id(thread_id: str, turn: int | str) -> str:
    """The workflow id of ``thread_id``'s turn ``turn``."""
    if not isinstance(thread_id, str) or _THREAD_ID.fullmatch(thread_id) is None:
        raise ValueError(
            f"thread_id {thread_id!r}: use 1-128 letters, digits, '_', '.', ':' or '-', "
            "starting with a letter or digit"
        )
    if isinstance(turn, bool) or not isinstance(turn, int | str) or not _TURN.fullmatch(str(turn)):
        raise ValueError(f"turn {turn!r}: a number or 1-128 letters, digits, '_', '.', ':', '-'")
    return f"{thread_id}/{turn}"


class RunHandle:
    """One durable turn: its workflow id, status, result, and questions to the user."""

    def __init__(self, client: DurableClient, workflow_id: str, handle: Any) -> None:
        self._client = client
        self.workflow_id = workflow_id
        self._handle = handle

    def result(self, timeout: float | None = None) -> TurnResult:
        """Wait for the turn (up to ``timeout`` seconds) and return its result; a failed turn
        raises TurnFailedError, a cancelled one TurnCancelledError, a turn still running after
        ``timeout`` TimeoutError."""
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        while deadline is not None:
            status = self.status()
            if status in _FINISHED or status == "CANCELLED":
                break
            if time.monotonic() >= deadline:
                raise TimeoutError(f"turn {self.workflow_id!r} still {status} after {timeout} s")
            time.sleep(0.05)
        try:
            return self._handle.get_result()
        except Exception as error:
            if type(error).__name__ != "DBOSAwaitedWorkflowCancelledError":
                raise
        raise TurnCancelledError(
            f"turn {self.workflow_id!r} was cancelled; its thread holds what it wrote before"
        )

    def cancel(self) -> Cancelled:
        """Cancel the turn (see :meth:`DurableClient.cancel`)."""
        return self._client.cancel(self.workflow_id)

    def status(self) -> str:
        """DBOS's status of the turn: ENQUEUED, PENDING, SUCCESS, ERROR, CANCELLED, ..."""
        return str(self._handle.get_status().status)

    def question(self, timeout: float = 0.0) -> Question | None:
        """The question the turn waits on the user for, if any (waiting up to ``timeout``)."""
        found = self._client.dbos.get_event(self.workflow_id, QUESTION_EVENT, timeout)
        if not isinstance(found, Question) or self.status() == "CANCELLED":
            return None  # a cancelled turn's last question stays recorded, unanswerable
        return found

    def answer(self, text: str) -> None:
        """Answer the question the turn waits on; a repeated answer to it is delivered once."""
        question = self.question()
        if question is None:
            raise DurableError(f"turn {self.workflow_id!r} is not waiting for the user")
        key = f"{self.workflow_id}:answer:{question.number}"
        self._client.dbos.send(self.workflow_id, text, ANSWER_TOPIC, key)


_FINISHED = ("SUCCESS", "ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")


@dataclass(frozen=True, slots=True)
class Cancelled:
    """What cancelling a turn did: ``cancelled`` False when it had finished already."""

    workflow_id: str
    cancelled: bool
    status: str
    """The turn's DBOS status after the call (CANCELLED, or how it finished)."""
    detail: str

    def __str__(self) -> str:
        return self.detail


class DurableClient:
    """Enqueues turns on ``queue``, which workers (``DurableRuns.launch``) serve.

    ``application_version`` pins the version of workers that may run the turns it enqueues
    (None: the latest version any worker registered).
    """

    def __init__(
        self,
        url: str,
        *,
        queue: str = "roboz",
        application_version: str | None = None,
        schema: str = "roboz",
    ) -> None:
        from dbos import DBOSClient

        self.url = url
        self.queue = queue
        self.application_version = application_version
        self.schema = schema
        self.where = check(url, schema=schema)
        dbos_url = sqlalchemy_url(url)
        try:
            self.dbos = DBOSClient(
                system_database_url=dbos_url,
                dbos_system_schema=DBOS_SCHEMA,
                application_name="roboz",
            )
        except Exception as error:
            text = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise DurableError(
                f"cannot use {describe_server(url)}: {text.replace(dbos_url, redacted(url))}"
            ) from None

    def enqueue(
        self,
        agent: str,
        input: str,
        *,
        thread_id: str,
        turn: int | str | None = None,
        goals: Sequence[AgentGoal | Mapping[str, Any]] = (),
        client_tools: Sequence[ClientToolSpec | Mapping[str, Any]] = (),
    ) -> RunHandle:
        """Queue ``agent``'s turn on ``thread_id`` with the user's message ``input``.

        ``goals`` are the turn's goals, as for ``Agent.invoke(goals=...)``: the worker's agent
        checks them with its ``goal_checks`` (a goal type it has no check for fails the turn
        before it touches the thread). ``client_tools`` are offered to the LLM and run by the
        caller: a turn that calls one ends waiting for its result (``TurnResult.pending``);
        continue it with :meth:`submit_tool_results`."""
        from roboz.agent.client_tools import client_tools as offer
        from roboz.agent.goals import as_goal

        asked = [as_goal(goal).model_dump(mode="json") for goal in goals]
        specs = [
            (s if isinstance(s, ClientToolSpec) else ClientToolSpec.model_validate(s)).model_dump(
                mode="json"
            )
            for s in client_tools
        ]
        offer(specs)  # a schema the worker could not enforce is refused here, not there
        if turn is None:
            turn = self._next_turn(thread_id)
        return self._enqueue(workflow_id(thread_id, turn), agent, input, thread_id, asked, specs)

    def submit_tool_results(
        self,
        agent: str,
        thread_id: str,
        results: Mapping[str, Any],
        *,
        turn: int | str | None = None,
    ) -> RunHandle:
        """Answer the client tool uses ``thread_id`` waits for and continue its turn, as a
        new durable turn of ``agent`` (the client tools are the waiting turn's).

        ``results`` maps each pending ``tool_use_id`` to what the tool returned (text or
        JSON). Unknown or missing ids raise ClientToolError and record nothing. The
        continuation's id is ``"<thread_id>/<turn>"``, by default derived from the answered
        ids, so submitting the same results again returns the run already there."""
        import psycopg

        from roboz.durable.waiting import take
        from roboz.threads.turn_rows import connection

        answered = sorted(results)
        if turn is None:
            turn = "results." + ".".join(answered)
        wid = workflow_id(thread_id, turn)
        found = self.dbos.list_workflows(workflow_ids=[wid], load_input=False, load_output=False)
        if not found:  # checked before enqueueing: a wrong submission leaves nothing behind
            with psycopg.connect(self.url) as conn, conn.transaction():
                take(connection(conn, self.schema), thread_id, answered)
                raise psycopg.Rollback()  # only checked: the turn's begin takes the results
        return self._enqueue(wid, agent, "", thread_id, None, None, dict(results))

    def _enqueue(self, wid: str, agent: str, *args: Any) -> RunHandle:
        from dbos import EnqueueOptions

        options: EnqueueOptions = {
            "workflow_name": WORKFLOW,
            "queue_name": self.queue,
            "workflow_id": wid,
            "queue_partition_key": args[1],
        }
        if self.application_version is not None:
            options["app_version"] = self.application_version
        given: tuple[Any, ...] = (agent, *args)
        while given[-1] in (None, [], {}):  # run_turn's defaults: older turns' inputs match
            given = given[:-1]
        handle: Any = self.dbos.enqueue(options, *given)  # pyright: ignore[reportUnknownVariableType]
        self._check_same(wid, given)
        return RunHandle(self, wid, handle)

    def cancel(self, workflow_id: str) -> Cancelled:
        """Cancel turn ``workflow_id`` wherever it runs, and end its thread as a cancelled run.

        A queued turn never starts. A running one stops at its next step: a step in flight
        (an LLM call, a tool and its effect) finishes first, and what the turn wrote before
        stays in the thread, followed by a CANCELLED notice saying so; the thread
        is the user's turn again, and the thread's next turn runs normally. A turn waiting on
        the user stops at once. Recovery never resumes a cancelled turn. Cancelling a finished
        turn changes nothing and says so (``cancelled`` False); cancelling twice is harmless.
        """
        import psycopg

        from roboz.durable.cancel import end_cancelled
        from roboz.threads.turn_rows import connection

        before = self._status(workflow_id)
        if before in _FINISHED:
            return Cancelled(
                workflow_id, False, before, f"turn {workflow_id!r} already finished ({before})"
            )
        # Waits for a thread write of the turn in flight; no write of it can follow.
        self.dbos.cancel_workflow(workflow_id)
        after = self._status(workflow_id)
        if after != "CANCELLED":  # it finished just before the cancel
            return Cancelled(
                workflow_id, False, after, f"turn {workflow_id!r} already finished ({after})"
            )
        # A turn waiting on the user wakes to stop (DBOS's recv does not watch for a cancel).
        self.dbos.send(workflow_id, CancelSignal(), ANSWER_TOPIC, f"{workflow_id}:cancel")
        thread_id = workflow_id.split("/", 1)[0]
        with psycopg.connect(self.url) as conn, conn.transaction():
            end_cancelled(connection(conn, self.schema), thread_id, workflow_id)
        again = " (it was cancelled before)" if before == "CANCELLED" else ""
        return Cancelled(workflow_id, True, after, f"turn {workflow_id!r} cancelled{again}")

    def _status(self, workflow_id: str) -> str:
        found = self.dbos.list_workflows(
            workflow_ids=[workflow_id], load_input=False, load_output=False
        )
        if not found:
            raise DurableError(f"no durable turn {workflow_id!r} on this database")
        return str(found[0].status)

    def retrieve(self, workflow_id: str) -> RunHandle:
        """The handle of a turn enqueued earlier (by any client)."""
        return RunHandle(self, workflow_id, self.dbos.retrieve_workflow(workflow_id))

    def _next_turn(self, thread_id: str) -> int:
        prefix = workflow_id(thread_id, 0)[:-1]
        found = self.dbos.list_workflows(
            workflow_id_prefix=prefix, load_input=False, load_output=False
        )
        numbers = [
            int(w.workflow_id[len(prefix) :])
            for w in found
            if w.workflow_id[len(prefix) :].isdigit()
        ]
        return max(numbers, default=0) + 1

    def _check_same(self, wid: str, given: tuple[Any, ...]) -> None:
        found = self.dbos.list_workflows(workflow_ids=[wid], load_input=True, load_output=False)
        if not found:
            return
        held = found[0].input
        args = tuple(held.get("args", ())) if isinstance(held, dict) else ()
        if args != given:
            agent, text = ((*args, "?", "?"))[:2]
            raise WorkflowConflictError(
                f"turn {wid!r} already exists for agent {agent!r} with input {str(text)[:60]!r}; "
                f"this request asks agent {given[0]!r} with input {given[1][:60]!r}: use another "
                "turn id for a new turn"
            )

    def close(self) -> None:
        self.dbos.destroy()

    def __enter__(self) -> DurableClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
