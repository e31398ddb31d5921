"""The transcript port: where a run's messages go.

The scheduler never writes a conversation list itself: every message it adds goes through
``transcript.append(message)``, which returns once the message is recorded where the run
keeps it. Three transcripts exist, one interface:

- :class:`MemoryTranscript`: the conversation is the list (the caller's own, extended in
  place); nothing else is kept.
- a thread store's (``roboz.agent.persistence.StoreTranscript``): each message is committed
  as one row of the run's thread before ``append`` returns.
- a durable turn's (``roboz.durable.conversation.DurableTranscript``): each message is
  numbered on ``append`` and written with the turn's next recorded transaction.

``messages`` is the conversation as the run reads it (the LLM's view, goal checks, tools).
The loop also hands a transcript that ``streams`` the LLM's reply as it comes
(``on_reply``): a thread store's keeps it in a draft row that user interfaces watch grow.
A tool may add messages by appending to the list it is given (a tool that records its own
output); the loop hands them to the transcript when the tool returns (``adopt``). A stored
conversation only grows: its list (:class:`AppendOnlyList`) refuses rewrites, since the
rows already hold every message.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, SupportsIndex

from roboz.models import Message
from roboz.runtime.events import LLMDelta, LLMProseDelta, LLMRequested


class Transcript(Protocol):
    """Where a run's messages go (see the module docstring)."""

    @property
    def messages(self) -> list[Message]:
        """The conversation so far, as the run reads it."""
        ...

    @property
    def thread_id(self) -> str | None:
        """The thread the messages are kept in (None: in memory)."""
        ...

    @property
    def last_seq(self) -> int | None:
        """The thread sequence number of the last message (None while empty)."""
        ...

    def seq(self, index: int) -> int:
        """The thread sequence number of ``messages[index]``."""
        ...

    def append(self, message: Message, runtime_s: float = 0.0) -> None:
        """Add ``message`` and record it (``runtime_s``: how long the tool whose result it
        is ran, in seconds)."""
        ...

    def adopt(self) -> None:
        """Record the messages a tool appended to ``messages`` itself."""
        ...

    @property
    def streams(self) -> bool:
        """Whether it keeps the LLM's reply as it streams in (the loop then asks the
        endpoint to stream and hands the reply's progress to ``on_reply``)."""
        ...

    def on_reply(self, event: LLMRequested | LLMDelta | LLMProseDelta) -> None:
        """The LLM's reply as it comes: asked (again, after a rejected reply), raw text, the
        decoded prose of its fields. The finished reply is then ``append``ed."""
        ...


class MemoryTranscript:
    """A run kept in memory: the conversation is ``messages`` itself."""

    __slots__ = ("messages",)

    thread_id: None = None
    streams = False

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages

    @property
    def last_seq(self) -> int | None:
        return len(self.messages) - 1 if self.messages else None

    def seq(self, index: int) -> int:
        return range(len(self.messages))[index]

    def append(self, message: Message, runtime_s: float = 0.0) -> None:
        self.messages.append(message)

    def adopt(self) -> None:
        return None  # appended to the list: kept already

    def on_reply(self, event: LLMRequested | LLMDelta | LLMProseDelta) -> None:
        return None


def _refuse(*args: object, **kwargs: object) -> Any:
    raise TypeError(
        "a persisted conversation only grows by append/extend; every message is already "
        "committed to the thread store"
    )


class AppendOnlyList(list[Message]):
    """The conversation of a stored run: a plain list that only grows (appending does no
    I/O; the transcript records new messages). Rewrites are refused where they are made,
    since the stored rows keep the messages as they were."""

    __slots__ = ()

    def __iadd__(self, messages: Iterable[Message]) -> AppendOnlyList:  # type: ignore[override,misc]
        self.extend(messages)
        return self

    # Assigned, not defined, so every mutator shares one refusal; the checkers cannot see that
    # the signatures differ from list's on purpose.
    insert = remove = clear = sort = reverse = __setitem__ = __delitem__ = _refuse  # pyright: ignore[reportAssignmentType]
    __imul__ = _refuse  # pyright: ignore[reportAssignmentType]

    def pop(self, index: SupportsIndex = -1) -> Message:
        return _refuse()  # type: ignore[no-any-return,unused-ignore]


def take_new(messages: list[Message], recorded: int, last: Message | None) -> list[Message]:
    """What a tool appended to ``messages`` after the ``recorded`` messages a transcript
    holds (the last of them ``last``); an append-only list cannot lose them, a list that
    was rewritten anyway is refused."""
    count = len(messages)
    if count < recorded or (recorded and messages[recorded - 1] is not last):
        _refuse()
    return messages[recorded:] if count > recorded else []
