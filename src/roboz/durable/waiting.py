"""Client tools in durable turns: a thread that waits for the client's results.

A turn whose LLM calls a client tool ends with the thread in CLIENT_TOOL_TURN, its run context
(the client tools, and the uses it waits for, as a persisted run keeps it: ``run_context`` in
the thread's metadata) written in the turn's last transaction. The results continue it as a
new turn (``DurableClient.submit_tool_results``), whose ``roboz.begin`` checks them against
the uses the thread waits for and clears the wait in the same transaction (:func:`take`), so
results are recorded once even when submitted twice, and a new user turn is refused while
the thread waits, as ``Agent.invoke`` refuses it.
"""

from __future__ import annotations

import json
from typing import Any

from roboz.agent.client_tools import ClientToolError
from roboz.threads.postgres import _WRITE_LOCK, _key  # pyright: ignore[reportPrivateUsage]
from roboz.threads.record import AgentThreadStatus


def take(raw: Any, schema: str, thread_id: str, answered: list[str] | None) -> str:
    """The thread's run context (JSON) for a turn beginning now: for a continuation
    (``answered``: the tool use ids it brings results for) it must answer exactly what the
    thread waits for, and the wait ends; a new turn must find the thread not waiting."""
    raw.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_WRITE_LOCK, _key(thread_id) & 0x7FFFFFFF))
    row = raw.execute(
        f'SELECT status, meta FROM "{schema}".threads WHERE thread_id = %s', (thread_id,)
    ).fetchone()
    status = None if row is None else str(row[0])
    context: dict[str, Any] = {} if row is None else json.loads(row[1]).get("run_context") or {}
    pending = sorted(context.get("waiting_for") or ())
    waits = status == AgentThreadStatus.CLIENT_TOOL_TURN.value and bool(pending)
    if answered is None:
        if waits:
            raise ClientToolError(
                f"thread {thread_id!r} waits for the results of client tool uses {pending}; "
                "submit them with submit_tool_results before continuing it; nothing was recorded"
            )
        return json.dumps(context)
    if not waits:
        raise ClientToolError(
            f"thread {thread_id!r} is not waiting for client tool results (its status is "
            f"{status}); nothing was recorded"
        )
    if sorted(answered) != pending:
        raise ClientToolError(
            f"thread {thread_id!r} waits for results of {pending}, not {sorted(answered)}; "
            "nothing was recorded"
        )
    keep(raw, schema, thread_id, json.dumps({**context, "waiting_for": []}))
    return json.dumps(context)


def keep(raw: Any, schema: str, thread_id: str, context: str) -> None:
    """Set the thread's run context (JSON)."""
    raw.execute(
        f'UPDATE "{schema}".threads SET meta = (meta::jsonb || '
        "jsonb_build_object('run_context', %s::jsonb))::text WHERE thread_id = %s",
        (context, thread_id),
    )
