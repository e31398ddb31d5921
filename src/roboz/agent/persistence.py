"""Persisted runs: a run's transcript kept in a thread store, one row per message.

``StoreTranscript.append`` commits each message the run adds as one small transaction (no
rewrite, no batching: a message is in the store when ``append`` returns); the rows hold what
``roboz.agent.rows`` encodes. ``store_transcript`` opens the run's thread under its lease and
closes it when the run ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Generator, Iterable
from contextlib import contextmanager
from typing import TYPE_CHECKING

from roboz.agent.client_tools import ClientToolError
from roboz.agent.errors import AgentCancelledError, AgentConfigurationError
from roboz.agent.rows import extras_of, restore, thread_row, unsettled
from roboz.agent.transcript import AppendOnlyList, take_new
from roboz.models import Message, Role
from roboz.runtime.events import LLMDelta, LLMProseDelta, LLMRequested
from roboz.runtime.prose import ProseText
from roboz.threads import (
    AgentErrorContent,
    AgentMessage,
    AgentMessageStatus,
    AgentRole,
    AgentTextContent,
    AgentThreadStatus,
    ClientViewingContext,
    RunLease,
    RunRow,
    ThreadStore,
)
from roboz.threads._runs import cancelled_notice
from roboz.threads.content import decode_blocks

if TYPE_CHECKING:
    from roboz.agent.spec import RunSpec

THREAD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
"""What a thread id may look like: it appears in file names, URLs and log lines."""


def check_thread_id(thread_id: object, store: ThreadStore) -> str:
    if not isinstance(thread_id, str) or THREAD_ID.fullmatch(thread_id) is None:
        raise AgentConfigurationError(
            f"thread_id {thread_id!r} is not a thread id for {store_label(store)}: use 1-128 "
            "letters, digits, '_', '.', ':' or '-', starting with a letter or digit"
        )
    return thread_id


def store_label(store: ThreadStore) -> str:
    path = getattr(store, "path", None)
    return f"{type(store).__name__}({str(path)!r})" if path is not None else type(store).__name__


class StoreTranscript:
    """The transcript of a persisted run: ``append`` commits the message as one row of the
    run's thread (under the run's lease) before it returns.

    Messages whose truncation is not settled yet are watched, so how often they were shown
    reaches the store with the next append (a resumed run truncates them the same way). A
    reply streaming in is kept in a draft row that user interfaces watch grow
    (``on_reply``); the finished reply completes it.
    """

    def __init__(
        self,
        store: ThreadStore,
        lease: RunLease,
        messages: Iterable[Message],
        seqs: list[int],
        next_seq: int,
    ) -> None:
        self.store = store
        self.lease = lease
        self.messages: list[Message] = AppendOnlyList(messages)
        self._seqs = seqs  # thread sequence number of each recorded message
        self._next_seq = next_seq
        self._watched: dict[int, tuple[Message, int]] = {
            seq: (m, m.times_shown)
            for m, seq in zip(self.messages, seqs, strict=True)
            if unsettled(m)
        }
        self._draft: int | None = None  # row of the reply streaming in, if any
        self._prose = ProseText()
        self.end_status = AgentThreadStatus.USER_TURN
        """The thread's status once the run ends (e.g. CLIENT_TOOL_TURN, GOALS_FAILED)."""
        self.viewing_context: tuple[Message, ClientViewingContext] | None = None
        """A user's message still to be appended and the context to record on it."""
        self.open = True
        """False once the run ended: the list then stays as it is (pass it back to
        ``invoke(..., thread_id=...)`` to continue the thread with what was added)."""

    @property
    def thread_id(self) -> str:
        return self.lease.thread_id

    @property
    def draft(self) -> int | None:
        """The row of the reply streaming in, if any."""
        return self._draft

    @property
    def last_seq(self) -> int | None:
        return self._seqs[-1] if self._seqs else None

    def seq(self, index: int) -> int:
        return self._seqs[index]

    streams = True

    def on_reply(self, event: LLMRequested | LLMDelta | LLMProseDelta) -> None:
        """The reply streams into a GENERATING row, so user interfaces watch it grow: opened
        on the first raw delta, it grows by the reply's prose; asked again, the rejected
        attempt's draft goes."""
        if not self.open:
            return
        if isinstance(event, LLMProseDelta):
            if self._draft is not None:
                text = self._prose.add(event.field, event.text)
                if text:
                    block = AgentTextContent.model_construct(text=text)
                    self.store.append_blocks(self.thread_id, self._draft, [block])
        elif isinstance(event, LLMDelta):
            if self._draft is None and event.text:
                self._draft = self.store.open_draft(self.lease)
                self._next_seq = self._draft + 1
                self._prose = ProseText()
        else:
            self._drop_draft()

    def _drop_draft(self) -> None:
        if self._draft is not None:
            self.store.regenerate_turn(self.thread_id, self._draft)
            self._next_seq, self._draft = self._draft, None

    def _changed_extras(self) -> list[tuple[int, str]]:
        changed: list[tuple[int, str]] = []
        for seq, (message, shown) in list(self._watched.items()):
            if message.times_shown != shown:
                changed.append((seq, extras_of(message)))
                if unsettled(message):
                    self._watched[seq] = (message, message.times_shown)
                else:
                    del self._watched[seq]
        return changed

    def append(self, message: Message, runtime_s: float = 0.0) -> None:
        self.messages.append(message)
        self._record_new(message, round(runtime_s * 1000))

    def adopt(self) -> None:
        self._record_new(None, 0)

    def _record_new(self, timed: Message | None, runtime_ms: int) -> None:
        """Commit the messages of the list not committed yet, in its order: the one just
        appended, and any another thread appended to the list (a Librarian's sweep records
        its prompts so), so the thread's order is always the list's."""
        recorded = len(self._seqs)
        last = self.messages[recorded - 1] if recorded else None
        for message in take_new(self.messages, recorded, last):
            self._record(message, runtime_ms if message is timed else 0)

    def _record(self, message: Message, runtime_ms: int) -> None:
        """Commit ``message``, the first of the list not committed yet."""
        if not self.open:
            return
        if self._draft is not None and message.message_kind != "action":
            self._drop_draft()  # e.g. the repair exchange: it comes before the reply
        seq = self._next_seq if self._draft is None else self._draft
        recorded = len(self._seqs)
        previous = (self._seqs[-1], self.messages[recorded - 1]) if recorded else None
        context = None
        if self.viewing_context is not None and self.viewing_context[0] is message:
            context, self.viewing_context = self.viewing_context[1], None
        row = thread_row(message, seq, previous, runtime_ms, context)
        if self._draft is None:
            written = self.store.append_run_message(self.lease, row, self._changed_extras())
        else:
            # The streamed text stays as it was sent; the tool use is appended after it.
            added = [b for b in decode_blocks(row.content) if not isinstance(b, AgentTextContent)]
            self.store.finish_draft(self.lease, seq, row, added, self._changed_extras())
            written, self._draft = seq, None
        self._seqs.append(written)
        self._next_seq = written + 1
        if unsettled(message):
            self._watched[written] = (message, message.times_shown)


@contextmanager
def store_transcript(
    spec: RunSpec,
    store: ThreadStore,
    messages: list[Message] | None,
    thread_id: str,
    viewing_context: ClientViewingContext | None = None,
) -> Generator[StoreTranscript, None, None]:
    """Open (or create) ``thread_id`` in ``store`` for one run of ``spec``.

    A new (or still empty) thread starts from ``messages``, else the agent's initial
    messages; an existing one from its stored conversation, with ``messages`` appended as
    new messages, except a leading part equal to the stored conversation (a conversation an
    earlier run returned, with messages added): only what follows it is new. The lease is
    released when the run ends, whatever the outcome.

    ``viewing_context`` is recorded as a client-context block on the last user message this
    run adds (none is recorded when it adds no user message).
    """
    if store.read_only:
        raise AgentConfigurationError(
            f"agent {spec.name!r}: {store_label(store)} is opened read-only; a run needs to "
            "write its thread"
        )
    start = list(messages if messages is not None else spec.initial_messages)
    initial: list[RunRow] = []
    previous: tuple[int, Message] | None = None
    users = [m for m in start if m.role is Role.USER]
    with_context = users[-1] if users and viewing_context is not None else None
    for seq, message in enumerate(start):
        context = viewing_context if message is with_context else None
        initial.append(thread_row(message, seq, previous, 0, context))
        previous = (seq, message)
    lease, rows, created = store.open_run(
        thread_id,
        org_id="local",
        created_by=spec.name,
        created_from_agent_id=spec.name,
        initial=initial,
    )
    loaded, seqs = restore(rows)
    next_seq = rows[-1].seq + 1 if rows else 0
    transcript = StoreTranscript(store, lease, loaded, seqs, next_seq)
    try:
        if not created and viewing_context is not None:
            new = start[_stored_prefix(loaded, start) :] if messages is not None else start
            users = [m for m in new if m.role is Role.USER]
            if users and (messages is not None or not loaded):
                transcript.viewing_context = (users[-1], viewing_context)
        if not created and messages is not None:
            for message in start[_stored_prefix(loaded, start) :]:
                transcript.append(message)
        elif not created and not loaded:  # e.g. a thread a client opened for this run
            for message in start:
                transcript.append(message)
        yield transcript
    except ClientToolError:
        # Results that did not fit what the thread waits for: it keeps waiting, nothing added.
        store.close_run(lease, AgentThreadStatus.CLIENT_TOOL_TURN)
        raise
    except BaseException as error:
        # A cancel (Agent.cancel, AgentRun.cancel, the run's task cancelled) is the seed's
        # CANCELLED, on the reply it cut off and on the notice; anything else FAILED.
        cancelled = isinstance(error, AgentCancelledError | asyncio.CancelledError)
        ended = AgentMessageStatus.CANCELLED if cancelled else AgentMessageStatus.FAILED
        draft = transcript.draft
        if draft is not None:  # the run broke off while a reply streamed
            with contextlib.suppress(Exception):
                store.append_blocks(thread_id, draft, [], ended)
        if cancelled:
            notice = cancelled_notice(str(error) or "the run was cancelled")
        else:
            notice = AgentMessage(
                role=AgentRole.ROBOTO,
                content=[AgentErrorContent(error_message=f"{type(error).__name__}: {error}")],
                status=AgentMessageStatus.FAILED,
            )
        store.close_run(lease, AgentThreadStatus.USER_TURN, notice)
        raise
    else:
        store.close_run(lease, transcript.end_status)
    finally:
        transcript.open = False


def _same(a: Message, b: Message) -> bool:
    # times_shown is left out: it is a counter of the run, not what the message says.
    return (a.role, a.content, a.caller, a.message_kind, a.images) == (
        b.role,
        b.content,
        b.caller,
        b.message_kind,
        b.images,
    )


def _stored_prefix(stored: list[Message], given: list[Message]) -> int:
    """How many leading messages of ``given`` are the stored conversation itself."""
    if len(given) < len(stored) or not stored:
        return 0
    return len(stored) if all(map(_same, stored, given)) else 0
