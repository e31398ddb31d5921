"""The thread API in-process: a store seen as one caller (``store.for_caller(caller)``).

:class:`CallerThreads` is what ``roboz serve`` runs every request through, so the rules of
``roboz.threads.identity`` hold the same whether a thread is reached over HTTP or from
Python: another organization's thread, or a PRIVATE thread of someone else, is "not found";
a visible thread the caller may not change refuses with ThreadPermissionError; threads are
created with the caller as creator and with ``origin`` set here (API), never by the caller;
and reads come back as the API shows them (:func:`api_view`): a tool result's legacy
``raw_response`` is stripped, with ``payload`` rebuilt from it first.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from roboz.threads._access import ThreadPage
from roboz.threads.backend import ThreadStore
from roboz.threads.content import AgentToolResultContent
from roboz.threads.errors import ThreadNotFoundError, ThreadPermissionError, ThreadReadOnlyError
from roboz.threads.identity import Caller, can_change, can_read
from roboz.threads.record import (
    AgentMessage,
    AgentThreadDelta,
    AgentThreadRecord,
    ThreadOrigin,
    ThreadVisibility,
)


class ThreadRating(StrEnum):
    """A person's verdict on a thread or on one of its messages."""

    POSITIVE = "positive"
    NEGATIVE = "negative"


class AccessStore(ThreadStore, Protocol):
    """A thread store with what the API adds (both RoboZ stores are one)."""

    def thread_metadata(self, thread_id: str) -> AgentThreadRecord: ...

    def thread_state(self, thread_id: str) -> tuple[int, bool] | None: ...

    def change_stamp(self) -> Hashable | None:
        """Equal while nothing is committed to the store; None: the store cannot tell."""
        ...

    def visible_threads(
        self,
        caller: Caller,
        *,
        limit: int = 50,
        page_token: str | None = None,
        query: str | None = None,
        pinned_only: bool = False,
    ) -> ThreadPage: ...

    def set_pinned(self, thread_id: str, user_id: str, pinned: bool) -> datetime | None: ...

    def rate_thread(
        self,
        thread_id: str,
        user_id: str,
        rating: str,
        *,
        sequence_num: int | None = None,
        comment: str | None = None,
    ) -> datetime: ...

    def delete_thread(self, thread_id: str) -> None: ...

    def for_caller(self, caller: Caller) -> CallerThreads: ...

    def verify_api_token(self, token: str) -> Caller | None: ...

    def fork_thread(
        self,
        source_thread_id: str,
        up_to_sequence_num: int,
        *,
        created_by: str,
        created_by_principal: str | None = None,
        title: str | None = None,
        visibility: ThreadVisibility = ThreadVisibility.PRIVATE,
    ) -> AgentThreadRecord: ...


def _strip(message: AgentMessage) -> AgentMessage:
    if not any(
        isinstance(b, AgentToolResultContent) and (b.raw_response is not None or b.payload is None)
        for b in message.content
    ):
        return message
    content = [
        b.model_copy(update={"payload": b.resolve_payload(), "raw_response": None})
        if isinstance(b, AgentToolResultContent)
        else b
        for b in message.content
    ]
    return message.model_copy(update={"content": content})


def api_view(record: AgentThreadRecord) -> AgentThreadRecord:
    """``record`` as the API shows it: every tool result's ``payload`` set (rebuilt from a
    legacy ``raw_response``) and ``raw_response`` stripped. ``record`` is left unchanged."""
    messages = [_strip(m) for m in record.messages]
    if all(a is b for a, b in zip(messages, record.messages, strict=True)):
        return record
    return record.model_copy(update={"messages": messages})


def api_delta(delta: AgentThreadDelta) -> AgentThreadDelta:
    """``delta`` as the API sends it (see :func:`api_view`)."""
    messages = {i: _strip(m) for i, m in delta.messages_by_idx.items()}
    if all(messages[i] is m for i, m in delta.messages_by_idx.items()):
        return delta
    return delta.model_copy(update={"messages_by_idx": messages})


class CallerThreads:
    """``store`` as ``caller`` sees it: every method checks the visibility rules first."""

    def __init__(self, store: AccessStore, caller: Caller) -> None:
        self.store = store
        self.caller = caller

    # -- the checks ----------------------------------------------------------------------------

    def readable(self, thread_id: str) -> AgentThreadRecord:
        """The thread's metadata if the caller may read it; else ThreadNotFoundError, worded
        as for a thread that does not exist."""
        try:
            record = self.store.thread_metadata(thread_id)
        except ThreadNotFoundError:
            record = None
        if record is None or not can_read(self.caller, record):
            raise ThreadNotFoundError(f"no thread {thread_id!r}")
        return record

    def changeable(self, thread_id: str) -> AgentThreadRecord:
        """The thread's metadata if the caller may change it (its creator or an admin)."""
        record = self.readable(thread_id)
        if not can_change(self.caller, record):
            raise ThreadPermissionError(
                f"thread {thread_id!r} belongs to {record.created_by!r}; only its creator or "
                "an admin of its organization may change it"
            )
        return record

    def writable(self, thread_id: str) -> AgentThreadRecord:
        """As :meth:`changeable`, and the thread must take new messages (not read-only)."""
        record = self.changeable(thread_id)
        if record.is_read_only():
            raise ThreadReadOnlyError(
                f"thread {thread_id!r} is owned by {record.origin!r} and refuses new messages; "
                "fork it for a writable copy"
            )
        return record

    # -- reads ---------------------------------------------------------------------------------

    def get_thread(self, thread_id: str) -> AgentThreadRecord:
        """The whole thread as the API shows it (``pinned_at`` is None on single reads)."""
        try:
            record = self.store.get_thread(thread_id)
        except ThreadNotFoundError:
            record = None
        # Checked on the record read anyway (one read, not two); a refusal reads as missing.
        if record is None or not can_read(self.caller, record):
            raise ThreadNotFoundError(f"no thread {thread_id!r}")
        return api_view(record)

    def delta_since(self, thread_id: str, continuation_token: str | None) -> AgentThreadDelta:
        self.readable(thread_id)
        return api_delta(self.store.delta_since(thread_id, continuation_token))

    def list_threads(
        self, *, limit: int = 50, page_token: str | None = None, pinned_only: bool = False
    ) -> ThreadPage:
        """The threads the caller may read, newest first, with their own ``pinned_at``."""
        return self.store.visible_threads(
            self.caller, limit=limit, page_token=page_token, pinned_only=pinned_only
        )

    def search_threads(
        self, query: str, *, limit: int = 50, page_token: str | None = None
    ) -> ThreadPage:
        """Readable threads whose title or message text contains ``query``."""
        if not query.strip():
            raise ValueError("the search query is empty")
        return self.store.visible_threads(
            self.caller, limit=limit, page_token=page_token, query=query
        )

    # -- writes --------------------------------------------------------------------------------

    def create_thread(
        self,
        *,
        title: str | None = None,
        visibility: ThreadVisibility = ThreadVisibility.PRIVATE,
        agent_id: str | None = None,
        messages: Sequence[AgentMessage] = (),
    ) -> AgentThreadRecord:
        """A new thread of the caller's, owned by RoboZ's API (origin is not the caller's
        to choose)."""
        return api_view(
            self.store.create_thread(
                org_id=self.caller.org_id,
                created_by=self.caller.user_id,
                created_by_principal=self.caller.principal,
                title=title,
                visibility=ThreadVisibility(visibility),
                origin=ThreadOrigin.API,
                created_from_agent_id=agent_id,
                messages=messages,
            )
        )

    def fork_thread(
        self,
        thread_id: str,
        up_to_sequence_num: int,
        *,
        title: str | None = None,
        visibility: ThreadVisibility = ThreadVisibility.PRIVATE,
    ) -> AgentThreadRecord:
        """A writable copy of messages 0..``up_to_sequence_num``, owned by the caller (any
        reader may fork)."""
        self.readable(thread_id)
        fork = self.store.fork_thread(
            thread_id,
            up_to_sequence_num,
            created_by=self.caller.user_id,
            created_by_principal=self.caller.principal,
            title=title,
            visibility=ThreadVisibility(visibility),
        )
        return api_view(fork)

    def delete_thread(self, thread_id: str) -> None:
        self.changeable(thread_id)
        self.store.delete_thread(thread_id)

    def set_title(self, thread_id: str, title: str) -> None:
        self.changeable(thread_id)
        self.store.set_title(thread_id, title)

    def set_pinned(self, thread_id: str, pinned: bool) -> datetime | None:
        """Pin or unpin for the caller alone; returns the pin's time (None: unpinned)."""
        self.readable(thread_id)
        return self.store.set_pinned(thread_id, self.caller.user_id, pinned)

    def rate_thread(
        self,
        thread_id: str,
        rating: ThreadRating,
        *,
        sequence_num: int | None = None,
        comment: str | None = None,
    ) -> datetime:
        """The caller's rating of the thread or one message (open on read-only threads)."""
        self.readable(thread_id)
        return self.store.rate_thread(
            thread_id,
            self.caller.user_id,
            ThreadRating(rating).value,
            sequence_num=sequence_num,
            comment=comment,
        )


__all__ = [
    "AccessStore",
    "CallerThreads",
    "ThreadPage",
    "ThreadRating",
    "api_delta",
    "api_view",
]
