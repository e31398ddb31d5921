"""``DurableRuns``: the agents a worker serves, and the process's DBOS launch.

DBOS is one runtime per process, so a process launches one DurableRuns at most. ``launch``
checks the database first (``roboz.durable.schema.check``: one clear line when it is not
ready), then starts DBOS with the given executor id and the pinned application version, and
registers the queue:

- partitioned by thread with one turn per partition at a time, so turns of one thread never
  overlap, on this worker or any other, and run in the order they were enqueued;
- ``worker_concurrency`` turns at most on this process, ``concurrency`` on all workers.

Executor ids and versions matter for recovery. DBOS's ``launch`` resumes only the pending
turns of its own executor id and application version, so a worker restarted under the same
id finishes what it was running; a dead worker's turns are resumed by another worker through
``DBOS.resume_workflow`` (``roboz.durable.recovery``). Two live processes must never share an
executor id (each would re-run the other's steps). Pin ``application_version`` across a
deployment: a turn is only resumed by workers of the version that started it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

from roboz.agent import Agent
from roboz.agent.errors import AgentConfigurationError
from roboz.durable._urls import sqlalchemy_url, with_search_path
from roboz.durable.conversation import Row, Updated
from roboz.durable.errors import DurableError
from roboz.durable.step_writes import StepWrites, in_step, write_progress
from roboz.durable.workflow import Host, Snapshot, Started, set_host
from roboz.models import Message
from roboz.threads import ClientViewingContext
from roboz.threads.record import AgentThreadStatus

P = ParamSpec("P")
T = TypeVar("T")


def default_version() -> str:
    from importlib.metadata import version

    return f"roboz-{version('roboz')}"


class _Statements:
    """Runs the thread store's SQL (``turn_rows.connection``) on a datasource transaction's
    connection, through SQLAlchemy, so a lost connection surfaces as the DBAPIError that
    DBOS retries the transaction on."""

    def __init__(self, session: Any) -> None:
        self._conn = session.connection()

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        return self._conn.exec_driver_sql(sql, tuple(parameters))


class DurableRuns:
    """The agents whose turns run durably on ``queue``; ``launch`` makes this process a worker.

    ``url`` is the PostgreSQL database (a libpq URL or conninfo string) holding the thread
    store (schema ``schema``) and DBOS's tables; prepare it once with ``roboz threads migrate
    --url URL``. ``ask_timeout_s`` bounds how long a turn waits for the user's answer to
    ``ask_user`` (the wait is durable: it survives restarts). ``polling_interval_s`` is how
    often a worker looks for queued turns. ``progress`` writes a turn's new messages to the
    thread before each tool call, so readers follow the turn as it runs; ``False`` writes them
    once at the end (and before ``ask_user``), saving a transaction per tool call.
    """

    def __init__(
        self,
        url: str,
        *,
        agents: Sequence[Agent],
        queue: str = "roboz",
        application_version: str | None = None,
        worker_concurrency: int | None = None,
        concurrency: int | None = None,
        schema: str = "roboz",
        ask_timeout_s: float = 24 * 3600.0,
        polling_interval_s: float = 1.0,
        progress: bool = True,
    ) -> None:
        self.url = url
        self.agents: dict[str, Agent] = {}
        for agent in agents:
            if agent.name in self.agents:
                raise AgentConfigurationError(f"two agents are named {agent.name!r}")
            if agent.user_io is not None:
                raise AgentConfigurationError(
                    f"agent {agent.name!r}: a durable turn asks its user through the run "
                    "(RunHandle.question/answer); give the agent no user_io"
                )
            self.agents[agent.name] = agent
        self.queue = queue
        self.application_version = application_version or default_version()
        self.worker_concurrency = worker_concurrency
        self.concurrency = concurrency
        self.schema = schema
        self.ask_timeout_s = ask_timeout_s
        self.polling_interval_s = polling_interval_s
        self.progress = progress
        self.executor_id: str | None = None
        self._datasource: Any = None
        self._step_writes: StepWrites | None = None

    # -- the worker ----------------------------------------------------------------------------

    def launch(self, *, executor_id: str, log_level: str = "WARNING") -> None:
        """Start DBOS in this process as worker ``executor_id`` of ``queue``; pending turns of
        this executor id and version resume at once."""
        from dbos import DBOS, DBOSConfig, SQLAlchemyDatasource

        from roboz.durable import workflow
        from roboz.durable.outages import wait_out_missing_sockets
        from roboz.durable.schema import DBOS_SCHEMA, check

        if self.executor_id is not None:
            raise DurableError(f"these DurableRuns are already launched as {self.executor_id!r}")
        check(self.url, schema=self.schema)
        wait_out_missing_sockets()
        dbos_url = sqlalchemy_url(self.url)
        config: DBOSConfig = {
            "name": "roboz",
            "system_database_url": dbos_url,
            "dbos_system_schema": DBOS_SCHEMA,
            "application_version": self.application_version,
            "executor_id": executor_id,
            "run_migrations": False,
            "log_level": log_level,
        }
        assert workflow.run_turn is not None  # registered on import, before DBOS starts
        DBOS(config=config)
        # The thread store's tables without a statement naming them in each transaction
        # (DBOS's own datasource table is named with its schema).
        self._datasource = SQLAlchemyDatasource.create(
            with_search_path(dbos_url, self.schema), schema=DBOS_SCHEMA, run_migrations=False
        )
        self._step_writes = StepWrites(self.url, schema=self.schema)
        set_host(self._host())
        try:
            DBOS.launch()
            DBOS.register_queue(
                self.queue,
                partition_concurrency=1,
                worker_concurrency=self.worker_concurrency,
                global_concurrency=self.concurrency,
                polling_interval_sec=self.polling_interval_s,
                on_conflict="always_update",
            )
        except BaseException:
            set_host(None)
            DBOS.destroy()
            raise
        self.executor_id = executor_id

    def shutdown(self, *, workflow_completion_timeout_s: float = 5.0) -> None:
        """Stop taking turns and stop DBOS; turns still running resume later (same executor
        id after a restart, or another worker's recovery)."""
        from dbos import DBOS

        if self.executor_id is None:
            return
        DBOS.destroy(workflow_completion_timeout_sec=int(workflow_completion_timeout_s))
        set_host(None)
        if self._step_writes is not None:
            self._step_writes.close()
        self.executor_id = None

    # -- what the workflow needs ---------------------------------------------------------------

    def _host(self) -> Host:
        from roboz.agent.rows import restore, thread_row
        from roboz.durable import cancel, waiting
        from roboz.threads import turn_rows
        from roboz.threads.postgres import notify_changed

        datasource = self._datasource
        step_writes = self._step_writes
        assert step_writes is not None
        schema = self.schema
        host = Host()
        host.agents = self.agents
        host.schema = schema
        host.ask_timeout_s = self.ask_timeout_s
        host.progress = self.progress
        options: Any = {"isolation_level": "READ COMMITTED"}

        def begin_tx(
            raw: Any,
            workflow_id: str,
            thread_id: str,
            created_by: str,
            initial: list[Message],
            user: Message | None,
            answered: list[str] | None,
            viewing: dict[str, Any] | None,
            ran: Callable[[], None],
        ) -> Started:
            ran()
            conn = turn_rows.connection(raw, None)
            cancel.guard(conn, workflow_id)
            held = turn_rows.holder(conn, thread_id)
            if held is not None and held != workflow_id:  # its canceller died before ending it
                cancel.end_cancelled(conn, thread_id, held)
            context = waiting.take(conn, thread_id, answered)
            rows, first = turn_rows.begin_turn(conn, thread_id, created_by=created_by)
            turn_rows.mark(conn, thread_id, workflow_id)
            history, seqs = restore(rows)
            new = [] if user is None else [*([] if rows else initial), user]
            previous = (seqs[-1], history[-1]) if history else None
            shown = None if viewing is None else ClientViewingContext.model_validate(viewing)
            written: list[Row] = []
            for offset, message in enumerate(new):
                seq = first + offset
                users = user is not None and offset == len(new) - 1  # the user's message
                row = thread_row(message, seq, previous, 0, shown if users else None)
                written.append((seq, row.role.value, row.content, row.extras))
                previous = (seq, message)
            turn_rows.write_rows(conn, thread_id, written)
            tasks, goals = conn.execute(
                "SELECT tasks, goals FROM threads WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            notify_changed(raw, schema, thread_id)
            return Started(rows, new, first, tasks or "[]", goals or "[]", context)

        def write_tx(
            raw: Any,
            workflow_id: str,
            thread_id: str,
            rows: list[Row],
            updated: list[Updated],
            status: AgentThreadStatus | None,
            snapshot: Snapshot,
            ran: Callable[[], None],
        ) -> int:
            ran()
            conn = turn_rows.connection(raw, None)
            cancel.guard(conn, workflow_id)
            count = turn_rows.write_rows(conn, thread_id, rows, updated)
            tasks, goals, context = snapshot
            if tasks is not None or goals is not None:  # the turn's task list or goals changed
                turn_rows.set_snapshot(conn, thread_id, tasks, goals)
            if context is not None:  # the client tool uses the thread now waits for
                turn_rows.set_run_context(conn, thread_id, json.loads(context))
            if status is not None:
                turn_rows.end_turn(conn, thread_id, status)
            notify_changed(raw, schema, thread_id)
            return count

        def progress_tx(
            raw: Any,
            workflow_id: str,
            thread_id: str,
            rows: list[Row],
            updated: list[Updated],
            status: AgentThreadStatus | None,
            snapshot: Snapshot,
            ran: Callable[[], None],
        ) -> int:
            """``write_tx`` as a tool step makes it: rows only (the usual case) pipelined
            (``step_writes.write_progress``), anything else as ``write_tx``."""
            if status is not None or snapshot != (None, None, None):
                return write_tx(raw, workflow_id, thread_id, rows, updated, status, snapshot, ran)
            ran()
            return write_progress(raw, schema, workflow_id, thread_id, rows, updated)

        def recorded(
            name: str,
            body: Callable[Concatenate[Any, P], T],
            in_step_body: Callable[Concatenate[Any, P], T] | None = None,
        ) -> Callable[P, T]:
            """``body`` as a DBOS datasource transaction: run once, its result recorded.
            Called inside a step, which is then the record, it is a transaction of that step
            (``step_writes``, running ``in_step_body`` if given): the writes a tool step
            makes as it begins."""

            def on_session(*args: P.args, **kwargs: P.kwargs) -> T:
                return body(_Statements(datasource.sql_session()), *args, **kwargs)

            def step(*args: P.args, **kwargs: P.kwargs) -> T:
                if in_step():
                    return step_writes.run(in_step_body or body, *args, **kwargs)
                settings = {**options, "name": name}
                return datasource.run_tx_step(settings, on_session, *args, **kwargs)

            return step

        host.begin = recorded("roboz.begin", begin_tx)
        host.write = recorded("roboz.write", write_tx, progress_tx)
        return host
