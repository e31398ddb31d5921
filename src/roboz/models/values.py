"""Typed values that tools take and return.

Every tool input and output is one of these (or a subclass). ``Empty`` is the root, so a tool
that accepts ``Empty`` can follow any tool. ``truncation`` is runtime metadata: it travels on
instances and in ``model_dump()``, but ``model_json_schema()`` omits it, so the LLM never
sees it as an argument it could set.
"""

from __future__ import annotations

from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from roboz.models.images import Image
from roboz.models.truncation import Truncation

# Fields that describe how the runtime treats a value rather than what the value is.
RUNTIME_FIELDS = frozenset(
    {"truncation", "message_kind", "endpoint", "model", "token_input", "token_output"}
)


class Empty(BaseModel):
    """A value with no payload; the base of every tool input and output."""

    model_config = ConfigDict(extra="forbid")

    truncation: SkipJsonSchema[Truncation | None] = None


class Int(Empty):
    value: int


class Str(Empty):
    value: str


class StrImage(Str):
    """Text with image attachments (an empty list is allowed)."""

    images: list[Image] = Field(...)


class RawText(Str):
    """Text a tool returned raw, as its explicit opt-in (``@tool(raw=True)`` on a function
    returning ``str``): the LLM sees the text itself, not the JSON of a value. A chained tool
    accepting Str receives it like any Str."""


class Stop(Empty):
    """Returning Stop ends the agent run; ``value`` is the run's result."""

    value: Any = ""


class Invoke(Empty):
    """Asks the agent to run the tool named ``action`` with ``input``.

    ``prompt_llm`` returns this; any tool may, to hand over to another tool explicitly.
    """

    action: str
    rationale: str = ""
    input: SkipJsonSchema[Empty] = Field(default_factory=Empty)


_NOT_PAYLOAD = set(RUNTIME_FIELDS) | {"images"}  # never mutated: built once, not per call


def payload_json(value: Empty) -> str:
    """The JSON the LLM sees for a value: no runtime metadata, no image attachments."""
    return value.model_dump_json(exclude=_NOT_PAYLOAD)


def result_text(value: Empty) -> str:
    """A tool result's text in the conversation: the JSON of the value, or a raw tool's
    text as it returned it."""
    return value.value if isinstance(value, RawText) else payload_json(value)


def images_of(value: BaseModel) -> list[Image]:
    """Images a value carries at its top level (result attachments)."""
    # Read from the fields, not getattr: a model without the field answers getattr through
    # pydantic's __getattr__ and an AttributeError, on every step of a run.
    images: object = value.__dict__.get("images")
    if isinstance(images, list):
        found = list(cast("list[object]", images))
        if all(isinstance(image, Image) for image in found):
            return cast("list[Image]", found)
    return []
