"""A message's thread row: the text written directly on the hot path is the text the generic
encoders write (blocks as ``encode_blocks`` stores them, extras as pydantic dumps them)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from roboz.agent.rows import action_of, extras_of, thread_row
from roboz.models import Image, Message, Role, Truncation
from roboz.runtime.prose import reply_prose
from roboz.threads import AgentRole, ClientViewingContext
from roboz.threads.content import decode_blocks

PNG = Image.from_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16, "image/png")
TEXTS = ["", "plain", 'quote " and \\ back', "line\nbreak\ttab\x01\x1f", "né 日本 🙂", "\x7f"]


def _reference(
    message: Message, seq: int, previous: tuple[int, Message] | None, runtime_ms: int
) -> tuple[AgentRole, list[list[Any]]]:
    """The row's blocks as plain data, built the generic way (dicts, json)."""

    def pair(kind: str, payload: dict[str, Any]) -> list[Any]:
        return [kind, {"content_type": kind, **payload}]

    if message.role is Role.USER:
        return AgentRole.USER, [["text", message.content]]
    if message.role is Role.ASSISTANT:
        action = action_of(message)
        if action is None:
            return AgentRole.ASSISTANT, [["text", message.content]]
        prose = reply_prose(message.content)
        use = {"tool_use_id": f"tu_{seq}", "tool_name": action[0], "input": action[1]}
        return AgentRole.ASSISTANT, [*([["text", prose]] if prose else []), pair("tool_use", use)]
    if message.role is Role.TOOL and message.message_kind == "tool_result":
        caller = message.caller or "tool"
        asked = None
        if previous is not None:
            action = action_of(previous[1])
            if action is not None and action[0] == caller:
                asked = f"tu_{previous[0]}"
        pairs: list[list[Any]] = []
        if asked is None:
            asked = f"tu_{seq}"
            pairs.append(pair("tool_use", {"tool_use_id": asked, "tool_name": caller}))
        try:
            data: Any = json.loads(message.content)
        except ValueError:
            data = message.content
        payload = data if isinstance(data, dict | list) else message.content
        result = {
            "tool_use_id": asked,
            "tool_name": caller,
            "runtime_ms": runtime_ms,
            "status": "success",
            "payload": payload,
        }
        return AgentRole.ROBOTO, [*pairs, pair("tool_result", result)]
    return AgentRole.ROBOTO, [["text", message.content]]


def _decoded(content: str) -> list[list[Any]]:
    pairs = json.loads(content)
    return [[kind, text if kind == "text" else json.loads(text)] for kind, text in pairs]


def _messages() -> list[Message]:
    found: list[Message] = []
    for text in TEXTS:
        found += [
            Message(role=Role.USER, content=text),
            Message(role=Role.TOOL, content=text, caller="tick", message_kind="tool_result"),
            Message(role=Role.TOOL, content=text, caller=text or None, message_kind="note"),
            Message(role=Role.ASSISTANT, content=text, message_kind=text or None),
        ]
    payloads = ['{"value": 1}', '{"value":"né"}', " [1, 2] ", '{"a": "\\u00e9"}', "42", "{oops"]
    found += [
        Message(role=Role.TOOL, content=p, caller="t", message_kind="tool_result") for p in payloads
    ]
    action = json.dumps({"action": "look", "rationale": "why", "path": "a\nb"})
    found += [
        Message(role=Role.ASSISTANT, content=action, caller="prompt_llm", message_kind="action"),
        Message(role=Role.TOOL, content='{"v": 1}', caller="look", message_kind="tool_result"),
        Message(role=Role.TOOL, content="x", images=[PNG], caller="shot"),
        Message(role=Role.TOOL, content="x", truncation=Truncation(threshold=2), times_shown=1),
        Message(
            role=Role.ASSISTANT,
            content="y",
            endpoint="e",
            model="m",
            token_input=1,
            token_output=2,
        ),
    ]
    return found


@pytest.mark.parametrize("runtime_ms", [0, 17])
def test_thread_rows_are_what_the_generic_encoders_write(runtime_ms: int) -> None:
    messages = _messages()
    for index, message in enumerate(messages):
        previous = (index - 1, messages[index - 1]) if index else None
        row = thread_row(message, index, previous, runtime_ms)
        role, blocks = _reference(message, index, previous, runtime_ms)
        assert (row.role, _decoded(row.content)) == (role, blocks), message
        decode_blocks(row.content)  # the store reads it back as blocks
        assert row.extras == message.model_dump_json(exclude_defaults=True), message
        assert extras_of(message) == row.extras


def test_a_viewing_context_is_a_block_of_the_users_message() -> None:
    context = ClientViewingContext.model_validate({"summary": "page 3"})
    row = thread_row(Message(role=Role.USER, content="hi"), 0, None, 0, context)
    kinds = [kind for kind, _ in _decoded(row.content)]
    assert kinds == ["text", "client_context"]


def test_text_that_cannot_be_stored_is_refused_as_before() -> None:
    lone = "\ud800"
    for message in (
        Message(role=Role.TOOL, content=lone, caller="t", message_kind="tool_result"),
        Message(role=Role.USER, content="ok", caller=lone),
    ):
        with pytest.raises(ValueError, match="surrogates not allowed"):
            thread_row(message, 0, None, 0)
