"""Conversation messages and helpers to query them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from roboz.models.images import Image
from roboz.models.truncation import Truncation


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    """A tool's result; providers receive it as a user message."""


RoleName = Literal["system", "user", "assistant", "tool"]
"""A role by its value: ``Message(role="user")`` is validated into ``Role.USER``."""


class Message(BaseModel):
    """One entry of an agent's conversation.

    ``caller`` names the tool that produced the message. Runtime metadata (truncation,
    message_kind, endpoint, model, token counts) is kept on the instance and in
    ``model_dump()``, omitted from ``model_json_schema()`` and from provider records.
    """

    model_config = ConfigDict(extra="forbid")

    role: Role
    content: str = ""
    images: list[Image] = Field(default_factory=list[Image])
    caller: str | None = None

    truncation: SkipJsonSchema[Truncation | None] = None
    message_kind: SkipJsonSchema[str | None] = None
    endpoint: SkipJsonSchema[str | None] = None
    model: SkipJsonSchema[str | None] = None
    token_input: SkipJsonSchema[int | None] = None
    token_output: SkipJsonSchema[int | None] = None
    times_shown: SkipJsonSchema[int] = 0
    """How many LLM calls have included this message (drives truncation thresholds)."""

    if TYPE_CHECKING:
        # What validation accepts, which is wider than what the fields hold afterwards: a
        # role by name (``role="user"``) and any sequence of images. Only type checkers see
        # this signature; the model validates as declared above.
        def __init__(
            self,
            *,
            role: Role | RoleName,
            content: str = "",
            images: Sequence[Image] = (),
            caller: str | None = None,
            truncation: Truncation | None = None,
            message_kind: str | None = None,
            endpoint: str | None = None,
            model: str | None = None,
            token_input: int | None = None,
            token_output: int | None = None,
            times_shown: int = 0,
        ) -> None: ...


_GIVEN = frozenset(Message.model_fields) - {"times_shown"}
_new = Message.__new__
_set_dict = object.__setattr__
# BaseModel's own slots, set through their descriptors as pydantic's construction sets them.
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def trusted_message(
    role: Role,
    content: str,
    *,
    images: list[Image],
    caller: str | None,
    message_kind: str,
    truncation: Truncation | None = None,
    endpoint: str | None = None,
    model: str | None = None,
    token_input: int | None = None,
    token_output: int | None = None,
) -> Message:
    """A Message from values already of the fields' types, without validation: what
    ``Message.model_construct`` makes, built directly (the agent loop makes one per step,
    and pydantic's generic construction costs several times a hand-written one)."""
    message = _new(Message)
    fields = {
        "role": role,
        "content": content,
        "images": images,
        "caller": caller,
        "truncation": truncation,
        "message_kind": message_kind,
        "endpoint": endpoint,
        "model": model,
        "token_input": token_input,
        "token_output": token_output,
        "times_shown": 0,
    }
    _set_dict(message, "__dict__", fields)
    _set_fields_set(message, set(_GIVEN))
    _set_extra(message, None)
    _set_private(message, None)
    return message


def filter_messages(
    *,
    messages: Iterable[Message],
    caller: str | None = None,
    role: Role | None = None,
    message_kind: str | None = None,
) -> list[Message]:
    """Messages matching every given criterion, in conversation order."""
    return [
        message
        for message in messages
        if (caller is None or message.caller == caller)
        and (role is None or message.role == role)
        and (message_kind is None or message.message_kind == message_kind)
    ]
