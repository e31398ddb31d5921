"""What the LLM sees of the stored conversation.

Truncation applies here and only here: stored messages keep their full content. The view is
incremental, so a call costs the same at step 200 as at step 2: each message is rendered once,
and only messages whose truncation has not reached its final form are looked at again.
"""

from __future__ import annotations

from typing import TypeVar, cast

from roboz.llm import EndpointLike, ProviderRecord, default_messages_scrubber, to_records
from roboz.llm.completion import to_record
from roboz.models import Message, Role, Severity

_T = TypeVar("_T")

_TRUNCATED = " … [truncated]"

COMPACTED_KIND = "compacted_context"
"""``message_kind`` of a compacted-context message. The LLM sees the conversation's head
(everything before the first assistant message: system, start-up and the task), then the
latest compacted message in place of everything between, then whatever followed it. The
stored conversation keeps every message; compaction, like truncation, is a view."""


def render_for_llm(message: Message) -> Message | None:
    """The message as the LLM should see it now, or None when it is removed."""
    truncation = message.truncation
    if truncation is None or not truncation.applies(message.times_shown):
        return message
    if truncation.severity is Severity.REMOVE:
        return None
    if truncation.severity is Severity.STUB:
        who = message.caller or message.role.value
        return message.model_copy(
            update={"content": f"[output of {who} hidden after being shown]", "images": []}
        )
    if len(message.content) <= truncation.max_chars:
        return message
    return message.model_copy(
        update={"content": message.content[: truncation.max_chars] + _TRUNCATED}
    )


def _settled(message: Message) -> bool:
    """True when further showings cannot change how the message renders."""
    truncation = message.truncation
    return truncation is None or truncation.applies(message.times_shown)


class ConversationView:
    """Incrementally maintained provider records for one endpoint and one conversation."""

    def __init__(self, endpoint: EndpointLike) -> None:
        self._endpoint = endpoint
        scrubber = endpoint.messages_scrubber
        # A custom scrubber may filter or reorder across messages, so it sees the whole list;
        # the default one maps message by message and can be cached.
        self._per_message = scrubber in (None, default_messages_scrubber)
        self._reset()

    def _reset(self) -> None:
        self._stored: list[Message] = []
        self._visible: list[Message | None] = []
        self._records: list[ProviderRecord | None] = []
        self._removed = 0  # how many of the records are None (messages removed from view)
        self._pending: list[int] = []
        self._head_end: int | None = None  # index of the first assistant message
        self._compacted: int | None = None  # index of the latest compacted message

    def _sync(self, messages: list[Message]) -> None:
        count = len(self._stored)
        if len(messages) < count or (count and messages[count - 1] is not self._stored[-1]):
            # The conversation was rewritten in place (e.g. compaction): start over.
            self._reset()
            count = 0
        for index in range(count, len(messages)):
            message = messages[index]
            self._stored.append(message)
            self._visible.append(None)
            self._records.append(None)
            self._removed += 1
            self._refresh(index)
            if not _settled(message):
                self._pending.append(index)
            if self._head_end is None and message.role is Role.ASSISTANT:
                self._head_end = index
            if message.message_kind == COMPACTED_KIND:
                self._compacted = index

    def _hidden(self, index: int) -> bool:
        """True for messages a compacted message stands in for."""
        head_end = self._head_end if self._head_end is not None else 0
        return self._compacted is not None and head_end <= index < self._compacted

    def _shown(self, items: list[_T]) -> list[_T]:
        if self._compacted is None:
            return items
        head_end = self._head_end if self._head_end is not None else 0
        return items[:head_end] + items[self._compacted :]

    def _refresh(self, index: int) -> None:
        visible = render_for_llm(self._stored[index])
        self._visible[index] = visible
        if self._per_message:
            record = None if visible is None else to_record(self._endpoint, visible)
            before = self._records[index]
            self._records[index] = record
            self._removed += (record is None) - (before is None)

    def records(self, messages: list[Message], head: list[ProviderRecord]) -> list[ProviderRecord]:
        """Records for one LLM call (``head`` first, e.g. the system prompt), counting the
        showing for messages whose truncation depends on it."""
        self._sync(messages)
        records: list[ProviderRecord]
        if self._per_message:
            shown = self._shown(self._records)
            # C-level copies, so late calls cost as little as early ones: one when every
            # message is shown (no None among the records), two when some are removed.
            if self._removed:
                records = [*head, *filter(None, shown)]
            else:
                records = [*head, *cast("list[ProviderRecord]", shown)]
        else:
            visible = [message for message in self._shown(self._visible) if message is not None]
            records = head + to_records(self._endpoint, visible)
        self._count_showing()
        return records

    def _count_showing(self) -> None:
        still_pending: list[int] = []
        for index in self._pending:
            if self._hidden(index):
                continue  # compacted away: never shown again, so its count is final
            message = self._stored[index]
            if self._visible[index] is not None:
                message.times_shown += 1
            self._refresh(index)
            if not _settled(message):
                still_pending.append(index)
        self._pending = still_pending
