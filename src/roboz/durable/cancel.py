"""Cancelling a durable turn: the guard its thread writes take, and ending its thread.

The thread's rows are written by the thread store's writer (``roboz.threads.turn_rows``);
what is decided here is when, from the turn's DBOS status.

DBOS cancels a workflow by setting its status to CANCELLED; the workflow stops when it next
starts a step, so a step in flight (an LLM call, a tool) runs to its end first, and an effect
it makes happens. What DBOS does not do is end the thread, which would stay the agent's turn.
Three parts make a cancelled turn leave its thread as a cancelled persisted run does (a
CANCELLED notice row after its last message, error code ``cancelled``, the user's turn):

- Every thread write of a turn (``roboz.begin``, ``roboz.write``) first reads the turn's DBOS
  status ``FOR SHARE`` in its own transaction (:func:`guard`). A write that finds the turn
  cancelled writes nothing; one that began earlier holds the row, so DBOS's cancel waits for
  it to commit. Once ``cancel_workflow`` returns, no write of the turn can follow.
- ``roboz.begin`` notes on the thread which turn holds it (``turn_rows.mark``, cleared when
  the turn ends), so ending a cancelled turn's thread is done once and only while that turn
  still holds it, never over the next turn of the thread (:func:`end_cancelled`).
- The canceller ends the thread right after cancelling (``DurableClient.cancel``), and the next
  turn's ``roboz.begin`` ends it first if the canceller could not (it died in between), so the
  thread never stays stuck on a turn that will not run again.
"""

from __future__ import annotations

from collections.abc import Callable

from roboz.durable.schema import DBOS_SCHEMA
from roboz.threads import AgentErrorContent, AgentMessage, AgentMessageStatus, AgentRole, turn_rows
from roboz.threads._runs import cancelled_notice
from roboz.threads._sql import Conn

ENDED = ("CANCELLED", "ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")
"""DBOS statuses of a turn that will not write its thread again."""


def guard(conn: Conn, workflow_id: str) -> None:
    """Refuse to write for a cancelled turn; hold its status so a cancel waits for this write."""
    hold(conn, workflow_id)()


def hold(conn: Conn, workflow_id: str) -> Callable[[], None]:
    """Hold the turn's status (``FOR SHARE``) from now to the end of the transaction, and
    return the check that refuses a cancelled turn. On a pipelined connection the status is
    read only when the check runs, in the same wait as the statements sent meanwhile: call
    it before the transaction commits (and before reporting any other failure of it)."""
    cursor = conn.execute(
        f"SELECT status FROM {DBOS_SCHEMA}.workflow_status WHERE workflow_uuid = ? FOR SHARE",
        (workflow_id,),
    )

    def check() -> None:
        row = cursor.fetchone()
        if row is not None and row[0] == "CANCELLED":
            raise cancelled(workflow_id)

    return check


def cancelled(workflow_id: str) -> BaseException:
    """DBOS's own cancellation error (a BaseException): it passes through the agent's error
    handling, and DBOS ends the workflow as cancelled."""
    from dbos._error import DBOSWorkflowCancelledError  # not exported by the package

    return DBOSWorkflowCancelledError(f"turn {workflow_id!r} was cancelled")


def _status(conn: Conn, workflow_id: str) -> str | None:
    row = conn.execute(
        f"SELECT status FROM {DBOS_SCHEMA}.workflow_status WHERE workflow_uuid = ?",
        (workflow_id,),
    ).fetchone()
    return None if row is None else str(row[0])


def end_cancelled(conn: Conn, thread_id: str, workflow_id: str) -> bool:
    """When turn ``workflow_id`` still holds the thread and will not run again, end it as a
    cancelled run ends: a CANCELLED notice row after its last message (a FAILED one when it
    ended by an error instead), the user's turn. Runs inside the caller's transaction
    (``conn``: ``turn_rows.connection``); True when it ended the thread, False when there was
    nothing to do (another turn holds it, or the turn already ended it)."""
    if turn_rows.holder(conn, thread_id) != workflow_id:
        return False
    status = _status(conn, workflow_id)
    if status not in ENDED:
        return False
    if status == "CANCELLED":  # as an in-process run records its cancel
        ending = cancelled_notice(f"turn {workflow_id!r} was cancelled")
    else:
        text = f"TurnFailedError: turn {workflow_id!r} ended ({status}) before finishing"
        ending = AgentMessage(
            role=AgentRole.ROBOTO,
            content=[AgentErrorContent(error_message=text)],
            status=AgentMessageStatus.FAILED,
        )
    turn_rows.end_with_notice(conn, thread_id, ending)
    return True
