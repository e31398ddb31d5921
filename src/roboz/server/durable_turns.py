"""Durable turns: a server whose turns run on ``roboz worker`` processes (``roboz serve
--durable``), sent there through a :class:`~roboz.durable.DurableClient`.

The server runs no agent itself. A user's message, client tool results and a cancel become
the DBOS calls a program would make (``enqueue``, ``submit_tool_results``,
``cancel_thread``); the worker that takes the turn writes the thread, and each of its write
transactions NOTIFYs the store's channel, so the server's streams (``pg_feed``) see the turn
as it goes. A turn is accepted once it is queued: the answer is 202 with the thread as it was,
and the worker's first write (the user's message, the agent's turn) follows as a delta.

What is refused before anything is queued, as for a turn run in-process: a thread the caller
may not write, one waiting for client tool results, unknown goal types, client tools that
clash with the agent's tools, and a thread with a turn queued or running (on any server:
the check reads the queue). Two requests racing for one thread past that check become one
turn, or a 409, never two overlapping turns: the queue runs one turn per thread at a time
and numbers them.

The server follows the turns it queued (one query for all of them every ``poll_s``) so
``running`` and the end of an AG-UI run work as they do in-process; a stream of any server
needs no such following, the worker's notices wake it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from roboz.agent import Agent
from roboz.agent.client_tools import client_tools
from roboz.agent.request import RunRequest
from roboz.agent.run import run_graph
from roboz.server.errors import ApiError
from roboz.threads import ThreadBusyError

if TYPE_CHECKING:
    from roboz.durable import DurableClient

log = logging.getLogger("roboz.server.durable")

_ENDED = ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")


def check_same_database(store: Any, client: DurableClient, postgres_feed: bool | None) -> None:
    """A durable server's store must be the thread store its workers write, with the feed
    that brings their writes to its streams; ValueError saying what differs otherwise."""
    from roboz.threads.postgres import describe

    url, schema = getattr(store, "url", None), getattr(store, "schema", None)
    if url is None or schema is None:
        raise ValueError(
            "durable turns need the PostgreSQL thread store their workers write, not a "
            f"{type(store).__name__}"
        )
    if postgres_feed is False:
        raise ValueError("durable turns reach the streams through the PostgreSQL feed: keep it")
    if describe(url) != describe(client.url) or schema != client.schema:
        raise ValueError(
            f"the store is {describe(url)}, schema {schema!r}, but the durable client's is "
            f"{describe(client.url)}, schema {client.schema!r}"
        )


class DurableTurns:
    """Sends this server's turns to the workers of ``client``'s queue and follows them."""

    durable = True

    def __init__(
        self, client: DurableClient, changed: Callable[[str], None], poll_s: float = 0.25
    ) -> None:
        self.client = client
        self._changed = changed
        self.poll_s = poll_s
        self._following: dict[str, str] = {}  # thread id -> workflow id of its queued turn
        self._poller: asyncio.Task[None] | None = None
        self.accepting = True

    def running(self, thread_id: str) -> bool:
        """Whether a turn this server queued on ``thread_id`` has not ended yet."""
        return thread_id in self._following

    @property
    def count(self) -> int:
        return len(self._following)

    async def start(
        self,
        agent: Agent,
        thread_id: str,
        *,
        text: str | None = None,
        request: RunRequest | None = None,
        results: Mapping[str, Any] | None = None,
    ) -> str:
        """Queue a turn (a user's ``text``, or client tool ``results``); returns its workflow
        id. Refusals are raised here, before anything is queued."""
        if not self.accepting:
            raise ApiError(503, "shutting_down", "the server is shutting down; retry elsewhere")
        request = request or RunRequest()
        if results is None:
            # A clash of client tools with the agent's own is refused as in-process.
            run_graph(agent.run_spec(), client_tools(request.client_tools))
        workflow_id = await asyncio.to_thread(
            self._enqueue, agent.name, thread_id, text or "", request, results
        )
        self._following[thread_id] = workflow_id
        if self._poller is None or self._poller.done():
            self._poller = asyncio.ensure_future(self._follow())
        return workflow_id

    def _enqueue(
        self,
        agent: str,
        thread_id: str,
        text: str,
        request: RunRequest,
        results: Mapping[str, Any] | None,
    ) -> str:
        from roboz.durable import WorkflowConflictError

        if results is not None:
            return self.client.submit_tool_results(agent, thread_id, results).workflow_id
        busy = self.client.active_turns(thread_id)
        if busy:
            raise ThreadBusyError(
                f"thread {thread_id!r} already has a turn queued or running ({busy[0]}); "
                "wait for it to end or cancel it"
            )
        try:
            handle = self.client.enqueue(
                agent,
                text,
                thread_id=thread_id,
                goals=request.goals,
                client_tools=request.client_tools,
                scope=request.scope,
                viewing_context=request.viewing_context,
            )
        except WorkflowConflictError:  # another request took the same turn number first
            raise ThreadBusyError(
                f"thread {thread_id!r} got another turn at the same moment; wait for it to end "
                "or cancel it"
            ) from None
        return handle.workflow_id

    def cancel(self, thread_id: str) -> bool:
        """No turn runs in this process: a cancel goes through the database
        (:meth:`cancel_turn`)."""
        return False

    async def cancel_turn(self, thread_id: str) -> bool:
        """Cancel the turn running or queued on ``thread_id``, wherever it runs; False when
        there is none. Its worker stops at its next step and the thread ends as a cancelled
        run ends (a CANCELLED notice, the user's turn)."""
        done = await asyncio.to_thread(self.client.cancel_thread, thread_id)
        return any(result.cancelled for result in done)

    async def _follow(self) -> None:
        """Until no followed turn is left: read their statuses, drop those that ended and
        wake the streams of their threads (an AG-UI run ends with its turn)."""
        while self._following:
            await asyncio.sleep(self.poll_s)
            following = dict(self._following)
            try:
                statuses = await asyncio.to_thread(self._statuses, list(following.values()))
            except Exception as error:  # the database is away: try again at the next tick
                log.warning("cannot read the durable turns' statuses: %s", error)
                continue
            for thread_id, workflow_id in following.items():
                if statuses.get(workflow_id) in _ENDED and (
                    self._following.get(thread_id) == workflow_id
                ):
                    del self._following[thread_id]
                    self._changed(thread_id)

    def _statuses(self, workflow_ids: list[str]) -> dict[str, str]:
        found = self.client.dbos.list_workflows(
            workflow_ids=workflow_ids, load_input=False, load_output=False
        )
        return {w.workflow_id: str(w.status) for w in found}

    async def drain(self, grace_s: float) -> None:
        """Stop taking turns. Queued and running turns go on on their workers."""
        self.accepting = False
        poller, self._poller = self._poller, None
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(BaseException):
                await poller
        await asyncio.to_thread(self.client.close)


__all__ = ["DurableTurns", "check_same_database"]
