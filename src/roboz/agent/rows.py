"""A RoboZ message as its thread row, and back.

Each row of a persisted run holds the seed-001 view of one message (text, tool-use and
tool-result blocks, for user interfaces) and the RoboZ message itself (``extras``: content,
images, caller, truncation, kind, endpoint, model, token usage, how often it was shown), from
which a resumed run rebuilds the conversation field by field. Every transcript that stores
messages (a thread store's, a durable turn's) encodes them here, so all write the same rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

from pydantic import TypeAdapter

from roboz.models import Message, Role
from roboz.runtime.prose import reply_prose
from roboz.threads import (
    AgentRole,
    AgentTextContent,
    ClientViewingContext,
    RunRow,
    StoredRunMessage,
)
from roboz.threads._runs import DRAFT, NOTICE


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return text


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
"""``json.dumps(..., ensure_ascii=False)`` without building an encoder per call."""

_quoted: Callable[[str], str] = json.encoder.encode_basestring
"""A str as a JSON string, non-ASCII kept (what ``_dumps`` and pydantic write for a str)."""

# Every row of a persisted run is encoded here, once per message: the common rows (a tool's
# result, a message with only role, content, caller and kind) are written as JSON text
# directly, the same text the generic encoders write for them (tests compare the two), since
# going through dicts and encoders cost several times the row's own commit.


def _pair(content_type: str, fields: str) -> str:
    """One stored block, ``[content_type, "<its payload as a JSON text>"]``; ``fields`` are
    the payload's members after ``content_type``, already encoded."""
    return (
        '["'
        + content_type
        + '", '
        + _quoted('{"content_type": "' + content_type + '", ' + fields + "}")
        + "]"
    )


def _members(payload: dict[str, Any]) -> str:
    return _dumps(payload)[1:-1]


def _encodable(text: str) -> bool:
    """False for text with a lone surrogate (which no encoder of a row accepts)."""
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _payload_text(text: str) -> str:
    """A tool result's stored payload, encoded: its JSON object or array, else its text as a
    JSON string.

    The seed's payload is text, an object or an array; a bare number, boolean or null read
    from the text (a client tool's result ``3``, a tool that printed ``42``) would be stored
    and then fail validation on every read of the thread. Valid JSON is embedded as it is,
    not decoded and encoded again, unless it holds escapes (one may stand for a lone
    surrogate, which the generic encoding refuses where it is stored)."""
    if text.lstrip()[:1] not in ("{", "["):
        return _quoted(text)
    try:
        data = json.loads(text)
    except ValueError:
        return _quoted(text)
    if not isinstance(data, dict | list):
        return _quoted(text)
    return _dumps(data) if "\\u" in text else text


def extras_of(message: Message) -> str:
    """The RoboZ message as its row's ``extras``: fields left at their defaults are left out
    (reading fills them in again), which keeps the row, and the pages a commit writes, small."""
    fields = message.__dict__
    content, caller, kind = fields["content"], fields["caller"], fields["message_kind"]
    if (
        fields["times_shown"]
        or fields["images"]
        or fields["truncation"] is not None
        or fields["endpoint"] is not None
        or fields["model"] is not None
        or fields["token_input"] is not None
        or fields["token_output"] is not None
        or not _encodable(content)
        or (caller is not None and not _encodable(caller))
        or (kind is not None and not _encodable(kind))
    ):
        return message.model_dump_json(exclude_defaults=True)
    # What model_dump_json(exclude_defaults=True) writes for this shape of message.
    text = '{"role":"' + fields["role"].value + '"'
    if content:
        text += ',"content":' + _quoted(content)
    if caller is not None:
        text += ',"caller":' + _quoted(caller)
    if kind is not None:
        text += ',"message_kind":' + _quoted(kind)
    return text + "}"


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
    extras = extras_of(message)  # first: it refuses text that cannot be stored
    content = message.content
    pairs: list[str]
    role = AgentRole.ROBOTO
    if message.role is Role.USER:
        role, pairs = AgentRole.USER, ['["text", ' + _quoted(content) + "]"]
        if viewing_context is not None:
            context = viewing_context.model_dump(mode="json")
            pairs.append(_pair("client_context", _members({"context": context})))
    elif message.role is Role.ASSISTANT:
        role, pairs = AgentRole.ASSISTANT, ['["text", ' + _quoted(content) + "]"]
        action = action_of(message)
        if action is not None:
            # What a user reads is the action's prose (rationale, text arguments), as it
            # streams; the arguments themselves are on the tool use.
            prose = reply_prose(content)
            pairs = ['["text", ' + _quoted(prose) + "]"] if prose else []
            use = {"tool_use_id": f"tu_{seq}", "tool_name": action[0], "input": action[1]}
            pairs.append(_pair("tool_use", _members(use)))
    elif message.role is Role.TOOL and message.message_kind == "tool_result":
        caller = _quoted(message.caller or "tool")
        asked = None
        if previous is not None:
            action = action_of(previous[1])
            if action is not None and action[0] == (message.caller or "tool"):
                asked = f'"tu_{previous[0]}"'
        pairs = []
        if asked is None:  # a default or chained tool: the scheduler ran it, so mint its call
            asked = f'"tu_{seq}"'
            pairs.append(_pair("tool_use", '"tool_use_id": ' + asked + ', "tool_name": ' + caller))
        result = (
            '"tool_use_id": '
            + asked
            + ', "tool_name": '
            + caller
            + ', "runtime_ms": '
            + str(int(runtime_ms))
            + ', "status": "success", "payload": '
            + _payload_text(content)
        )
        pairs.append(_pair("tool_result", result))
    else:
        pairs = ['["text", ' + _quoted(content) + "]"]
    return RunRow(role, "[" + ", ".join(pairs) + "]", extras)


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


def unsettled(message: Message) -> bool:
    """Whether how often ``message`` is shown may still change how it is truncated (its
    stored extras are then refreshed as it is shown)."""
    truncation = message.truncation
    return truncation is not None and not truncation.applies(message.times_shown)
