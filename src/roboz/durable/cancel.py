"""Cancelling a durable turn: the guard its thread writes take, and ending its thread.

DBOS cancels a workflow by setting its status to CANCELLED; the workflow stops when it next
starts a step, so a step in flight (an LLM call, a tool) runs to its end first, and an effect
it makes happens. What DBOS does not do is end the thread, which would stay the agent's turn.
Three parts make a cancelled turn leave its thread as a cancelled persisted run does (a
CANCELLED notice row after its last message, error code ``cancelled``, the user's turn):

- Every thread write of a turn (``roboz.begin``, ``roboz.write``) first reads the turn's DBOS
  status ``FOR SHARE`` in its own transaction (:func:`guard`). A write that finds the turn
  cancelled writes nothing; one that began earlier holds the row, so DBOS's cancel waits for
  it to commit. Once ``cancel_workflow`` returns, no write of the turn can follow.
- ``roboz.begin`` notes on the thread which turn holds it (``meta.durable_turn``, cleared when
  the turn ends), so ending a cancelled turn's thread is done once and only while that turn
  still holds it, never over the next turn of the thread (:func:`end_cancelled`).
- The canceller ends the thread right after cancelling (``DurableClient.cancel``), and the next
  turn's ``roboz.begin`` ends it first if the canceller could not (it died in between), so the
  thread never stays stuck on a turn that will not run again.
"""

from __future__ import annotations

import json
from typing import Any, cast

from roboz.durable.schema import DBOS_SCHEMA
from roboz.threads import AgentErrorContent, AgentMessage, AgentMessageStatus, AgentRole
from roboz.threads._runs import NOTICE, cancelled_notice
from roboz.threads.content import encode_blocks
from roboz.threads.postgres import _WRITE_LOCK, _key  # pyright: ignore[reportPrivateUsage]
from roboz.threads.record import AgentThreadStatus, utc_now

MARK = "durable_turn"
"""The key of ``threads.meta`` naming the durable turn that holds the thread."""

ENDED = ("CANCELLED", "ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")
"""DBOS statuses of a turn that will not write its thread again."""


def guard(raw: Any, workflow_id: str) -> None:
    """Refuse to write for a cancelled turn; hold its status so a cancel waits for this write."""
    row = raw.execute(
        f"SELECT status FROM {DBOS_SCHEMA}.workflow_status WHERE workflow_uuid = %s FOR SHARE",
        (workflow_id,),
    ).fetchone()
    if row is not None and row[0] == "CANCELLED":
        raise cancelled(workflow_id)


def cancelled(workflow_id: str) -> BaseException:
    """DBOS's own cancellation error (a BaseException): it passes through the agent's error
    handling, and DBOS ends the workflow as cancelled."""
    from dbos._error import DBOSWorkflowCancelledError  # not exported by the package

    return DBOSWorkflowCancelledError(f"turn {workflow_id!r} was cancelled")


def mark(raw: Any, schema: str, thread_id: str, workflow_id: str | None) -> None:
    """Note (or, with None, clear) which turn holds the thread."""
    value = "null" if workflow_id is None else json.dumps(workflow_id)
    raw.execute(
        f'UPDATE "{schema}".threads SET meta = (meta::jsonb || '
        f"jsonb_build_object('{MARK}', %s::jsonb))::text WHERE thread_id = %s",
        (value, thread_id),
    )


def holder(raw: Any, schema: str, thread_id: str) -> tuple[str | None, str | None]:
    """The turn noted as holding the thread and that turn's DBOS status (None, None: none)."""
    row = raw.execute(
        f"SELECT t.meta::jsonb ->> '{MARK}', w.status FROM \"{schema}\".threads t "
        f"LEFT JOIN {DBOS_SCHEMA}.workflow_status w ON w.workflow_uuid = t.meta::jsonb ->> "
        f"'{MARK}' WHERE t.thread_id = %s",
        (thread_id,),
    ).fetchone()
    if row is None:
        return None, None
    return cast("str | None", row[0]), cast("str | None", row[1])


def end_cancelled(raw: Any, schema: str, thread_id: str, workflow_id: str) -> bool:
    """When turn ``workflow_id`` still holds the thread and will not run again, end it as a
    cancelled run ends: a CANCELLED notice row after its last message (a FAILED one when it
    ended by an error instead), the user's turn. Runs inside the caller's transaction; True
    when it ended the thread, False when there was nothing to do (another turn holds it, or
    the turn already ended it)."""
    raw.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_WRITE_LOCK, _key(thread_id) & 0x7FFFFFFF))
    held, status = holder(raw, schema, thread_id)
    if held != workflow_id or status not in ENDED:
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
    notice = encode_blocks(ending.content)
    s = f'"{schema}"'
    (seq, revision) = raw.execute(
        f"UPDATE {s}.threads SET revision = revision + 1, message_count = message_count + 1, "
        "status = %s, status_revision = revision + 1 WHERE thread_id = %s "
        "RETURNING message_count - 1, revision",
        (AgentThreadStatus.USER_TURN.value, thread_id),
    ).fetchone()
    raw.execute(
        f"INSERT INTO {s}.messages (thread_id, seq, role, status, created, content, revision, "
        "base_revision, extras) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            thread_id,
            seq,
            AgentRole.ROBOTO.value,
            ending.status.value,
            utc_now().isoformat(),
            notice,
            revision,
            revision,
            NOTICE,
        ),
    )
    mark(raw, schema, thread_id, None)
    from roboz.threads.postgres import notify_changed  # streams of roboz serve wake at commit

    notify_changed(raw, schema, thread_id)
    return True
