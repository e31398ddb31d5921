"""Persisted runs: an agent's conversation kept in a thread store, one row per message.

The run mutates its conversation only through ``append``/``extend`` on the list it was given,
so a list that commits each message as it is appended persists the run with one small
transaction per message and no rewrite. Each row holds the seed-001 view of the message
(text, tool-use and tool-result blocks, for user interfaces) and the RoboZ message itself
(``extras``: content, images, caller, truncation, kind, endpoint, model, token usage, how often
it was shown), from which a resumed run rebuilds the conversation field by field.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Generator, Iterable
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, SupportsIndex, cast

from pydantic import TypeAdapter

from roboz.agent.client_tools import ClientToolError
from roboz.agent.errors import AgentCancelledError, AgentConfigurationError
from roboz.models import Message, Role
from roboz.runtime.events import (
    Event,
    EventPipe,
    LLMDelta,
    LLMProseDelta,
    LLMRequested,
    ToolStarted,
)
from roboz.runtime.prose import ProseText, reply_prose
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
    StoredRunMessage,
    ThreadStore,
)
from roboz.threads._runs import DRAFT, NOTICE, cancelled_notice
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


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return text


def _payload(text: str) -> Any:
    """A tool result's stored payload: its JSON object or array, else its text as it is.

    The seed's payload is text, an object or an array; a bare number, boolean or null read
    from the text (a client tool's result ``3``, a tool that printed ``42``) would be stored
    and then fail validation on every read of the thread."""
    data: Any = _json_or_text(text)
    return cast("Any", data) if isinstance(data, dict | list) else text


def _with_images(payload: Any, message: Message) -> Any:
    """A tool result's payload with the images the tool returned: the seed's payload is what
    the tool returned, and a value with images (``StrImage``) returned them beside its
    fields, so they go there, as ``{"url": ...}`` objects (``detail`` when not ``auto``).
    The LLM never sees them as text (the conversation's message keeps them apart); an API
    reader, the web UI and AG-UI do."""
    if not message.images:
        return payload
    images = [image.model_dump(mode="json", exclude_defaults=True) for image in message.images]
    if isinstance(payload, dict):
        return {**cast("dict[str, Any]", payload), "images": images}
    return {"value": payload, "images": images}


def action_of(message: Message) -> tuple[str, dict[str, Any] | None] | None:
    if message.role is not Role.ASSISTANT or message.message_kind != "action":
        return None
    data = _json_or_text(message.content)
    if not isinstance(data, dict):
        return None
    fields = cast("dict[str, Any]", data)
    action = fields.get("action")
    if not isinstance(action, str):
        return None
    # The rationale is why the LLM chose the action, not an argument of the tool.
    return action, {k: v for k, v in fields.items() if k not in ("action", "rationale")}


_dumps = json.JSONEncoder(ensure_ascii=False).encode
"""``json.dumps(..., ensure_ascii=False)`` without building an encoder per call (the hot path
of a persisted run encodes two or three values per message)."""


def _pair(content_type: str, payload: dict[str, Any]) -> list[str]:
    return [content_type, _dumps({"content_type": content_type, **payload})]


def extras_of(message: Message) -> str:
    """The RoboZ message as its row's ``extras``: fields left at their defaults are left out
    (reading fills them in again), which keeps the row, and the pages a commit writes, small."""
    return message.model_dump_json(exclude_defaults=True)


def thread_row(
    message: Message,
    seq: int,
    previous: tuple[int, Message] | None,
    runtime_ms: int,
    viewing_context: ClientViewingContext | None = None,
) -> RunRow:
    """The seed-001 view of one RoboZ message at ``seq``, encoded for its row (``previous``
    pairs tool results with the action that asked for them; ``viewing_context`` becomes a
    client-context block of a user's message).

    Encoded straight to the stored block format (what ``encode_blocks`` writes) rather than
    through the block models: it runs once per message on the hot path of a persisted run.
    """
    pairs: list[list[str]]
    role = AgentRole.ROBOTO
    if message.role is Role.USER:
        role, pairs = AgentRole.USER, [["text", message.content]]
        if viewing_context is not None:
            context = viewing_context.model_dump(mode="json")
            pairs.append(_pair("client_context", {"context": context}))
    elif message.role is Role.ASSISTANT:
        role, pairs = AgentRole.ASSISTANT, [["text", message.content]]
        action = action_of(message)
        if action is not None:
            # What a user reads is the action's prose (rationale, text arguments), as it
            # streams; the arguments themselves are on the tool use.
            prose = reply_prose(message.content)
            pairs = [["text", prose]] if prose else []
            use = {"tool_use_id": f"tu_{seq}", "tool_name": action[0], "input": action[1]}
            pairs.append(_pair("tool_use", use))
    elif message.role is Role.TOOL and message.message_kind == "tool_result":
        caller = message.caller or "tool"
        asked = None
        if previous is not None:
            action = action_of(previous[1])
            if action is not None and action[0] == caller:
                asked = f"tu_{previous[0]}"
        pairs = []
        if asked is None:  # a default or chained tool: the scheduler ran it, so mint its call
            asked = f"tu_{seq}"
            pairs.append(_pair("tool_use", {"tool_use_id": asked, "tool_name": caller}))
        result = {
            "tool_use_id": asked,
            "tool_name": caller,
            "runtime_ms": runtime_ms,
            "status": "success",
            "payload": _with_images(_payload(message.content), message),
        }
        pairs.append(_pair("tool_result", result))
    else:
        pairs = [["text", message.content]]
    return RunRow(role, _dumps(pairs), extras_of(message))


def message_from_row(row: StoredRunMessage) -> Message | None:
    """The RoboZ message of a stored row; None for the store's own notices."""
    if row.extras in (NOTICE, DRAFT):
        return None
    if row.extras is not None:
        return Message.model_validate_json(row.extras)
    # Written through the thread API (e.g. a user's message from a client): read its text.
    text = "".join(b.text for b in row.message.content if isinstance(b, AgentTextContent))
    role = {AgentRole.USER: Role.USER, AgentRole.ASSISTANT: Role.ASSISTANT}.get(
        row.message.role, Role.TOOL
    )
    return Message(role=role, content=text)


_MESSAGES = TypeAdapter(list[Message])


def restore(rows: list[StoredRunMessage]) -> tuple[list[Message], list[int]]:
    """The conversation stored in ``rows`` and the sequence number of each message.

    Rows the agent wrote are decoded in one pass (one JSON array, one validation), which
    keeps resuming a long thread fast; other rows one by one.
    """
    kept = [row for row in rows if row.extras not in (NOTICE, DRAFT)]
    if all(row.extras is not None for row in kept):
        array = "[" + ",".join([cast(str, row.extras) for row in kept]) + "]"
        return _MESSAGES.validate_json(array), [row.seq for row in kept]
    messages = [message_from_row(row) for row in kept]
    return [m for m in messages if m is not None], [row.seq for row in kept]


def _unsettled(message: Message) -> bool:
    truncation = message.truncation
    return truncation is not None and not truncation.applies(message.times_shown)


class PersistedConversation(list[Message]):
    """The conversation of a persisted run: each appended message is committed at once.

    Messages whose truncation is not settled yet are watched, so how often they were shown
    reaches the store with the next append (a resumed run truncates them the same way).
    """

    def __init__(
        self,
        store: ThreadStore,
        lease: RunLease,
        messages: Iterable[Message],
        seqs: list[int],
        next_seq: int,
    ) -> None:
        super().__init__(messages)
        self.store = store
        self.lease = lease
        self.thread_id = lease.thread_id
        self._seqs = seqs  # thread sequence number of each message
        self._next_seq = next_seq
        self._watched: dict[int, tuple[Message, int]] = {
            seq: (m, m.times_shown)
            for m, seq in zip(self, seqs, strict=True)
            if m.truncation is not None and _unsettled(m)
        }
        self._tool_started: float | None = None
        self._draft: int | None = None  # row of the reply streaming in, if any
        self._prose = ProseText()
        self.end_status = AgentThreadStatus.USER_TURN
        """The thread's status once the run ends (e.g. CLIENT_TOOL_TURN, GOALS_FAILED)."""
        self.viewing_context: tuple[Message, ClientViewingContext] | None = None
        """A user's message still to be appended and the context to record on it."""
        self.open = True
        """False once the run ended: later appends stay in memory (pass the list back to
        ``invoke(..., thread_id=...)`` to continue the thread with them)."""

    @property
    def draft(self) -> int | None:
        """The row of the reply streaming in, if any."""
        return self._draft

    @property
    def last_seq(self) -> int | None:
        """Thread sequence number of the last message, None while empty."""
        return self._seqs[-1] if self._seqs else None

    def on_event(self, event: Event) -> None:
        """Subscribed to its run's own pipe (never the agent's, which concurrent runs share),
        so every event here is of this run."""
        if isinstance(event, ToolStarted):
            self._tool_started = time.perf_counter()
        elif isinstance(event, LLMRequested) and self.open:
            self._drop_draft()  # asked again: the rejected attempt's draft goes
        elif isinstance(event, LLMDelta) and self.open and event.text:
            # The reply streams into a GENERATING row, so user interfaces watch it grow:
            # opened on the first raw delta, it grows by the reply's prose (LLMProseDelta).
            if self._draft is None:
                self._draft = self.store.open_draft(self.lease)
                self._next_seq = self._draft + 1
                self._prose = ProseText()
        elif isinstance(event, LLMProseDelta) and self._draft is not None and self.open:
            text = self._prose.add(event.field, event.text)
            if text:
                block = AgentTextContent.model_construct(text=text)
                self.store.append_blocks(self.thread_id, self._draft, [block])

    def _drop_draft(self) -> None:
        if self._draft is not None:
            self.store.regenerate_turn(self.thread_id, self._draft)
            self._next_seq, self._draft = self._draft, None

    def _runtime_ms(self) -> int:
        if self._tool_started is None:
            return 0
        return round((time.perf_counter() - self._tool_started) * 1000)

    def _changed_extras(self) -> list[tuple[int, str]]:
        changed: list[tuple[int, str]] = []
        for seq, (message, shown) in list(self._watched.items()):
            if message.times_shown != shown:
                changed.append((seq, extras_of(message)))
                if _unsettled(message):
                    self._watched[seq] = (message, message.times_shown)
                else:
                    del self._watched[seq]
        return changed

    def append(self, message: Message) -> None:
        if not self.open:
            super().append(message)
            return
        if self._draft is not None and message.message_kind != "action":
            self._drop_draft()  # e.g. the repair exchange: it comes before the reply
        seq = self._next_seq if self._draft is None else self._draft
        previous = (self._seqs[-1], self[-1]) if self else None
        context = None
        if self.viewing_context is not None and self.viewing_context[0] is message:
            context, self.viewing_context = self.viewing_context[1], None
        row = thread_row(message, seq, previous, self._runtime_ms(), context)
        if self._draft is None:
            written = self.store.append_run_message(self.lease, row, self._changed_extras())
        else:
            # The streamed text stays as it was sent; the tool use is appended after it.
            added = [b for b in decode_blocks(row.content) if not isinstance(b, AgentTextContent)]
            self.store.finish_draft(self.lease, seq, row, added, self._changed_extras())
            written, self._draft = seq, None
        super().append(message)
        self._seqs.append(written)
        self._next_seq = written + 1
        if _unsettled(message):
            self._watched[written] = (message, message.times_shown)

    def extend(self, messages: Iterable[Message]) -> None:
        for message in messages:
            self.append(message)

    def __iadd__(self, messages: Iterable[Message]) -> PersistedConversation:  # type: ignore[override,misc]
        self.extend(messages)
        return self

    def _refuse(self, *args: object, **kwargs: object) -> Any:
        raise TypeError(
            "a persisted conversation only grows by append/extend; every message is already "
            "committed to the thread store"
        )

    # Assigned, not defined, so every mutator shares one refusal; the checkers cannot see that
    # the signatures differ from list's on purpose.
    insert = remove = clear = sort = reverse = __setitem__ = __delitem__ = _refuse  # pyright: ignore[reportAssignmentType]

    def pop(self, index: SupportsIndex = -1) -> Message:
        return self._refuse()  # type: ignore[no-any-return,unused-ignore]


@contextmanager
def persisted_conversation(
    spec: RunSpec,
    store: ThreadStore,
    pipe: EventPipe,
    messages: list[Message] | None,
    thread_id: str,
    viewing_context: ClientViewingContext | None = None,
) -> Generator[PersistedConversation, None, None]:
    """Open (or create) ``thread_id`` in ``store`` for one run of ``spec``, listening to the
    run's own ``pipe`` (for the reply streaming in).

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
    conversation = PersistedConversation(store, lease, loaded, seqs, next_seq)
    unsubscribe = pipe.subscribe(conversation.on_event)
    try:
        if not created and viewing_context is not None:
            new = start[_stored_prefix(loaded, start) :] if messages is not None else start
            users = [m for m in new if m.role is Role.USER]
            if users and (messages is not None or not loaded):
                conversation.viewing_context = (users[-1], viewing_context)
        if not created and messages is not None:
            conversation.extend(start[_stored_prefix(loaded, start) :])
        elif not created and not loaded:  # e.g. a thread a client opened for this run
            conversation.extend(start)
        yield conversation
    except ClientToolError:
        # Results that did not fit what the thread waits for: it keeps waiting, nothing added.
        store.close_run(lease, AgentThreadStatus.CLIENT_TOOL_TURN)
        raise
    except BaseException as error:
        # A cancel (Agent.cancel, AgentRun.cancel, the run's task cancelled) is the seed's
        # CANCELLED, on the reply it cut off and on the notice; anything else FAILED.
        cancelled = isinstance(error, AgentCancelledError | asyncio.CancelledError)
        ended = AgentMessageStatus.CANCELLED if cancelled else AgentMessageStatus.FAILED
        draft = conversation.draft
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
        store.close_run(lease, conversation.end_status)
    finally:
        conversation.open = False
        unsubscribe()


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
