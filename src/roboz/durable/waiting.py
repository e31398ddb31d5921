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

from roboz.agent.client_tools import ClientToolError
from roboz.threads import turn_rows
from roboz.threads._sql import Conn
from roboz.threads.record import AgentThreadStatus


def take(conn: Conn, thread_id: str, answered: list[str] | None) -> str:
    """The thread's run context (JSON) for a turn beginning now: for a continuation
    (``answered``: the tool use ids it brings results for) it must answer exactly what the
    thread waits for, and the wait ends; a new turn must find the thread not waiting."""
    status, context = turn_rows.run_context(conn, thread_id)
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
    turn_rows.set_run_context(conn, thread_id, {**context, "waiting_for": []})
    return json.dumps(context)
