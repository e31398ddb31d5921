"""Compression tiers: shorter variants of messages, stored beside a never-changed original.

A thread's verbatim messages are what people and SDKs read; compression only produces
per-message variants, each stored under a tier. Reading a thread "at tier T" takes, for every
message, its variant at the most compressed tier not above T, or the original.

Invariants every variant keeps (checked by :func:`validate_variant`):

- same role as the original, and at least one block, so turn alternation is unchanged;
- USER messages are never altered by the DELETED tier (user turns are never dropped);
- every client-context block of the original is still there;
- tombstones and fillers appear only at the DELETED tier, and a filler is a message's only block.

What the deletion pass drops is chosen by one of two choosers: :func:`stale_tool_exchanges`
(tool exchanges older than the last N messages) or :func:`resolved_task_interiors` (every
non-USER message inside a resolved task's interior, collapsed wholesale).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from enum import StrEnum
from typing import Any

from roboz.threads.content import (
    AgentClientContextEntry,
    AgentCompressionFillerContent,
    AgentDeletedContent,
    AgentTextContent,
    AgentToolResultContent,
    AgentToolUseContent,
)
from roboz.threads.errors import CompressionError
from roboz.threads.record import AgentMessage, AgentRole
from roboz.threads.task import AgentTask, AgentTaskStatus

FILLER_TEXT = "<Deleted in compression>"
"""What the model is shown for a message compression emptied."""


class CompressionTier(StrEnum):
    """Compression levels, from mildest to strongest."""

    TRIMMED = "trimmed"
    """Long text and tool payloads cut short; nothing removed."""
    DELETED = "deleted"
    """Redundant blocks replaced by tombstones; emptied messages hold one filler."""


TIER_ORDER: tuple[CompressionTier, ...] = (CompressionTier.TRIMMED, CompressionTier.DELETED)

_ELIDED = (AgentDeletedContent, AgentCompressionFillerContent)


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}… [{len(text) - max_chars} characters trimmed]"


def trim_message(message: AgentMessage, *, max_chars: int = 2000) -> AgentMessage | None:
    """TRIMMED-tier variant of ``message``, or None when nothing in it is too long.

    Text blocks and tool-result payloads of ASSISTANT and ROBOTO messages longer than
    ``max_chars`` are cut and say how much was cut. User messages are kept whole.
    """
    if message.role is AgentRole.USER:
        return None
    changed = False
    blocks: list[Any] = []
    for block in message.content:
        if isinstance(block, AgentTextContent) and len(block.text) > max_chars:
            block = AgentTextContent(text=_cut(block.text, max_chars))
            changed = True
        elif isinstance(block, AgentToolResultContent):
            payload = block.resolve_payload()
            if payload is None:
                rendered = None
            elif isinstance(payload, str):
                rendered = payload
            else:
                rendered = json.dumps(payload, ensure_ascii=False)
            if rendered is not None and len(rendered) > max_chars:
                block = block.model_copy(
                    update={"payload": _cut(rendered, max_chars), "raw_response": None}
                )
                changed = True
        blocks.append(block)
    if not changed:
        return None
    return message.model_copy(update={"content": blocks}, deep=True)


def is_filler_text(text: str) -> bool:
    """True for text that says nothing: empty, whitespace or punctuation only."""
    return not any(character.isalnum() for character in text)


def deletion_pass(
    messages: Sequence[AgentMessage],
    drop_tool_use_ids: Collection[str] = (),
    *,
    collapse: Collection[int] = (),
) -> dict[int, AgentMessage]:
    """DELETED-tier variants, by message index, for the messages this pass changes.

    Tool-use and tool-result blocks whose ``tool_use_id`` is in ``drop_tool_use_ids`` and
    filler text blocks become tombstones. Non-USER messages at the indices in ``collapse``
    are collapsed wholesale: every block but a client-context one becomes a tombstone, and a
    tool exchange with a block there is dropped on both sides, so no call is left without its
    result or a result without its call. A message left with nothing but tombstones holds a
    single filler instead. USER messages and client-context blocks are never touched.
    ``messages`` are not modified.
    """
    collapsed = {i for i in collapse if 0 <= i < len(messages)}
    collapsed -= {i for i in collapsed if messages[i].role is AgentRole.USER}
    drop = set(drop_tool_use_ids)
    for index in collapsed:
        drop.update(
            block.tool_use_id
            for block in messages[index].content
            if isinstance(block, AgentToolUseContent | AgentToolResultContent)
        )
    variants: dict[int, AgentMessage] = {}
    for index, message in enumerate(messages):
        if message.role is AgentRole.USER:
            continue
        blocks: list[Any] = []
        changed = False
        for block in message.content:
            if index in collapsed:
                dropped = not isinstance(block, AgentClientContextEntry)
            else:
                dropped = (
                    isinstance(block, AgentToolUseContent | AgentToolResultContent)
                    and block.tool_use_id in drop
                ) or (isinstance(block, AgentTextContent) and is_filler_text(block.text))
            blocks.append(AgentDeletedContent() if dropped else block)
            changed = changed or dropped
        if not changed:
            continue
        if all(isinstance(block, AgentDeletedContent) for block in blocks):
            blocks = [AgentCompressionFillerContent()]
        variants[index] = message.model_copy(update={"content": blocks}, deep=True)
    return variants


START_TASK_TOOL = "start_task"
"""The tool whose successful call opens a task (RoboZ's task tools, ``roboz.agent.TASK_TOOLS``)."""
RESOLVE_TASK_TOOLS = frozenset({"complete_task"})
"""Tools whose successful call resolves a task."""
_RESOLVED = (AgentTaskStatus.COMPLETED, AgentTaskStatus.CANCELLED)


def _task_id(use: AgentToolUseContent) -> int | None:
    value = (use.input or {}).get("task_id")
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def resolved_task_interiors(
    messages: Sequence[AgentMessage], tasks: Sequence[AgentTask]
) -> set[int]:
    """Indices of the messages inside a resolved task's interior: what the deletion pass
    collapses (pass them as ``collapse``).

    A task is resolved when the thread's task list says it is completed or cancelled. Its
    interior is what lies strictly between the exchange that started it (the first
    successful ``start_task`` call for its id) and the exchange that resolved it (the first
    successful ``complete_task`` call for its id after that): the messages carrying the
    start's result and the resolving call stay, so the compressed thread still says the
    task was taken up and finished. A task without both exchanges in ``messages`` (resolved
    by its host, say) has no interior to collapse. USER messages are among the indices; the
    deletion pass never touches them.
    """
    resolved = {task.task_id for task in tasks if task.status in _RESOLVED}
    if not resolved:
        return set()
    succeeded = {
        block.tool_use_id
        for message in messages
        for block in message.content
        if isinstance(block, AgentToolResultContent) and block.status == "success"
    }
    result_at: dict[str, int] = {}
    for index, message in enumerate(messages):
        for block in message.content:
            if isinstance(block, AgentToolResultContent):
                result_at.setdefault(block.tool_use_id, index)
    started: dict[int, int] = {}  # task id -> index of the message with its start's result
    interiors: set[int] = set()
    for index, message in enumerate(messages):
        for block in message.content:
            if not isinstance(block, AgentToolUseContent) or block.tool_use_id not in succeeded:
                continue
            task_id = _task_id(block)
            if task_id not in resolved:
                continue
            if block.tool_name == START_TASK_TOOL and task_id not in started:
                started[task_id] = result_at[block.tool_use_id]
            elif block.tool_name in RESOLVE_TASK_TOOLS and task_id in started:
                interiors.update(range(started.pop(task_id) + 1, index))
                resolved.discard(task_id)  # its first resolution ends it
    return interiors


def stale_tool_exchanges(messages: Sequence[AgentMessage], *, keep_last: int) -> set[str]:
    """Ids of tool exchanges (use and result) lying entirely before the last ``keep_last``
    messages: the default choice of what the deletion pass may drop."""
    boundary = max(len(messages) - keep_last, 0)
    used: set[str] = set()
    answered: set[str] = set()
    recent: set[str] = set()
    for index, message in enumerate(messages):
        for block in message.content:
            if isinstance(block, AgentToolUseContent | AgentToolResultContent):
                if index >= boundary:
                    recent.add(block.tool_use_id)
                elif isinstance(block, AgentToolUseContent):
                    used.add(block.tool_use_id)
                else:
                    answered.add(block.tool_use_id)
    return (used & answered) - recent


def validate_variant(original: AgentMessage, variant: AgentMessage, tier: CompressionTier) -> None:
    """Raise CompressionError if ``variant`` may not stand in for ``original`` at ``tier``."""
    if variant.role is not original.role:
        raise CompressionError(
            f"a compressed variant must keep the role {original.role.value!r}, "
            f"not {variant.role.value!r}"
        )
    if not variant.content:
        raise CompressionError("a compressed variant needs at least one block; use a filler")
    elided = [block for block in variant.content if isinstance(block, _ELIDED)]
    if elided and tier is not CompressionTier.DELETED:
        raise CompressionError(f"tombstones and fillers belong to the DELETED tier, not {tier}")
    if (
        any(isinstance(b, AgentCompressionFillerContent) for b in elided)
        and len(variant.content) != 1
    ):
        raise CompressionError("a compression filler must be the only block of its message")
    if (
        original.role is AgentRole.USER
        and tier is CompressionTier.DELETED
        and variant.content != original.content
    ):
        raise CompressionError("the DELETED tier never alters a USER message")
    contexts = [b for b in original.content if isinstance(b, AgentClientContextEntry)]
    missing = [c for c in contexts if c not in variant.content]
    if missing:
        raise CompressionError("a compressed variant must keep the client context block")


def ensure_verbatim(message: AgentMessage) -> None:
    """Raise CompressionError if ``message`` carries compression blocks (never in originals)."""
    if any(isinstance(block, _ELIDED) for block in message.content):
        raise CompressionError(
            "tombstones and compression fillers exist only in DELETED-tier variants; the "
            "verbatim thread never contains them"
        )


def compressed_view(
    originals: Sequence[AgentMessage],
    variants: Mapping[int, Mapping[CompressionTier, AgentMessage]],
    tier: CompressionTier,
) -> list[AgentMessage]:
    """The thread as seen at ``tier``: each message's strongest variant up to ``tier``."""
    allowed = TIER_ORDER[: TIER_ORDER.index(tier) + 1]
    view: list[AgentMessage] = []
    for index, original in enumerate(originals):
        stored = variants.get(index, {})
        chosen = next((stored[t] for t in reversed(allowed) if t in stored), original)
        view.append(chosen)
    return view


def model_facing_blocks(message: AgentMessage) -> list[Any]:
    """Blocks to send the model: tombstones dropped, a filler shown as :data:`FILLER_TEXT`."""
    blocks: list[Any] = []
    for block in message.content:
        if isinstance(block, AgentDeletedContent):
            continue
        if isinstance(block, AgentCompressionFillerContent):
            blocks.append(AgentTextContent(text=FILLER_TEXT))
        else:
            blocks.append(block)
    return blocks
