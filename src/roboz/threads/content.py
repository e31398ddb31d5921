"""Typed content blocks of agent messages, and their one serialization map.

Every block except plain text carries a ``content_type`` discriminator. Text blocks are kept
as raw text when persisted, so ``AgentTextContent`` has no discriminator field; when a block
arrives as JSON without ``content_type`` but with ``text``, it is a text block.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any, Literal, Union, cast, get_args

from pydantic import AliasChoices, BaseModel, Discriminator, Field, Tag
from pydantic_core import PydanticSerializationError

from roboz.threads.context import ClientViewingContext
from roboz.threads.errors import (
    CorruptRecordError,
    UnencodableTextError,
    UnmappedContentTypeError,
)


class AgentContentType(StrEnum):
    """The kinds of content block a message can hold."""

    TEXT = "text"
    """Plain text written by a user or the model."""
    TOOL_USE = "tool_use"
    """The model asks for a tool to run."""
    TOOL_RESULT = "tool_result"
    """What a tool run returned."""
    ERROR = "error"
    """Why generating a message failed or was cancelled."""
    DELETED = "deleted"
    """Tombstone for a block compression removed; exists only in DELETED-tier variants."""
    COMPRESSION_FILLER = "compression_filler"
    """Sole block of a message compression emptied; exists only in DELETED-tier variants."""
    CLIENT_CONTEXT = "client_context"
    """The viewing context the user had when writing the message it sits on."""


class AgentTextContent(BaseModel):
    """A run of plain text."""

    text: str


class AgentToolUseContent(BaseModel):
    """The model's request to run a tool; ``tool_use_id`` pairs it with its result."""

    content_type: Literal[AgentContentType.TOOL_USE] = AgentContentType.TOOL_USE
    tool_use_id: str
    tool_name: str
    input: dict[str, Any] | None = None
    """Arguments the model chose, independent of any provider's wire format."""
    raw_request: dict[str, Any] | None = None
    """The request as received, before parsing."""


class AgentToolResultContent(BaseModel):
    """The outcome of one tool run.

    ``payload`` holds what the tool returned (text, a JSON object or an array). Results
    written before that field existed carry only ``raw_response``, a provider-shaped
    envelope; :meth:`resolve_payload` reads both uniformly.
    """

    content_type: Literal[AgentContentType.TOOL_RESULT] = AgentContentType.TOOL_RESULT
    tool_use_id: str
    tool_name: str
    runtime_ms: int
    """Wall-clock run time of the tool in milliseconds."""
    status: str
    """How the run ended, e.g. "success" or "error"."""
    payload: str | dict[str, Any] | list[Any] | None = None
    raw_response: dict[str, Any] | None = None
    """Deprecated provider envelope; new writers set ``payload`` instead."""

    def resolve_payload(self) -> str | dict[str, Any] | list[Any] | None:
        """The tool's output: ``payload`` when set, else rebuilt from ``raw_response``."""
        if self.payload is not None:
            return self.payload
        return synthesize_tool_result_payload(self.raw_response)


class AgentErrorContent(BaseModel):
    """Why a message could not be generated (an error, or the user cancelled)."""

    content_type: Literal[AgentContentType.ERROR] = AgentContentType.ERROR
    error_message: str
    """A message fit to show the user."""
    error_code: str | None = None
    """A stable code for programs to branch on, when there is one."""


class AgentDeletedContent(BaseModel):
    """Marks the slot of a block that compression removed; it has no payload.

    Dropped from what the model is sent. Only DELETED-tier compressed variants contain it;
    the verbatim thread never does.
    """

    content_type: Literal[AgentContentType.DELETED] = AgentContentType.DELETED


class AgentCompressionFillerContent(BaseModel):
    """The single block left in a message compression emptied completely.

    Keeping the message (with this filler, shown to the model as a short placeholder) keeps
    its role in place, so user/assistant alternation holds. Only DELETED-tier variants
    contain it.
    """

    content_type: Literal[AgentContentType.COMPRESSION_FILLER] = AgentContentType.COMPRESSION_FILLER


class AgentClientContextEntry(BaseModel):
    """The viewing context attached to the user's own message.

    A typed block rather than text: renderers that show text skip it, and because it sits on
    a USER message, compression never removes it. Input also accepts ``client_context`` as the
    field name.
    """

    content_type: Literal[AgentContentType.CLIENT_CONTEXT] = AgentContentType.CLIENT_CONTEXT
    context: ClientViewingContext = Field(
        validation_alias=AliasChoices("context", "client_context")
    )


def _content_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        tag: object = cast("dict[str, Any]", value).get("content_type")
        if tag is None and "text" in value:
            return AgentContentType.TEXT.value
        return None if tag is None else str(tag)
    if isinstance(value, AgentTextContent):
        return AgentContentType.TEXT.value
    tag = getattr(value, "content_type", None)
    return None if tag is None else str(tag)


AgentContent = Annotated[
    Union[  # noqa: UP007 - get_args() below needs the members of a real Union
        Annotated[AgentTextContent, Tag(AgentContentType.TEXT.value)],
        Annotated[AgentToolUseContent, Tag(AgentContentType.TOOL_USE.value)],
        Annotated[AgentToolResultContent, Tag(AgentContentType.TOOL_RESULT.value)],
        Annotated[AgentErrorContent, Tag(AgentContentType.ERROR.value)],
        Annotated[AgentDeletedContent, Tag(AgentContentType.DELETED.value)],
        Annotated[AgentCompressionFillerContent, Tag(AgentContentType.COMPRESSION_FILLER.value)],
        Annotated[AgentClientContextEntry, Tag(AgentContentType.CLIENT_CONTEXT.value)],
    ],
    Discriminator(
        _content_tag,
        custom_error_type="missing_content_type",
        custom_error_message="content block has neither a content_type nor a text field",
    ),
]
"""Any block a message can hold; JSON input is dispatched on ``content_type``."""

AGENT_CONTENT_MODEL_BY_TYPE: dict[AgentContentType, type[BaseModel]] = {
    AgentContentType.TOOL_USE: AgentToolUseContent,
    AgentContentType.TOOL_RESULT: AgentToolResultContent,
    AgentContentType.ERROR: AgentErrorContent,
    AgentContentType.DELETED: AgentDeletedContent,
    AgentContentType.COMPRESSION_FILLER: AgentCompressionFillerContent,
    AgentContentType.CLIENT_CONTEXT: AgentClientContextEntry,
}
"""Model class of every JSON-serialized block type. TEXT is absent: it is stored as raw text.

Both directions of persistence (:func:`encode_block`, :func:`decode_block`) read this map, so
they cannot drift apart.
"""


def content_union_members() -> tuple[type[BaseModel], ...]:
    """The model classes of the :data:`AgentContent` union, in declaration order."""
    union = get_args(AgentContent)[0]
    return tuple(get_args(member)[0] for member in get_args(union))


def check_content_map(
    members: tuple[type[BaseModel], ...],
    mapping: dict[AgentContentType, type[BaseModel]],
) -> None:
    """Raise UnmappedContentTypeError unless every non-text member has its own map entry."""
    for model in members:
        if model is AgentTextContent:
            continue
        field = model.model_fields.get("content_type")
        tag = field.default if field is not None else None
        if tag is None or mapping.get(tag) is not model:
            raise UnmappedContentTypeError(
                f"{model.__name__} is a member of AgentContent but AGENT_CONTENT_MODEL_BY_TYPE "
                f"has no entry for it (content_type {tag!r}); add one so it is persisted"
            )


check_content_map(content_union_members(), AGENT_CONTENT_MODEL_BY_TYPE)


def content_type_of(block: BaseModel) -> AgentContentType:
    """The discriminator value of ``block`` (TEXT for text blocks)."""
    if isinstance(block, AgentTextContent):
        return AgentContentType.TEXT
    tag = getattr(block, "content_type", None)
    if tag is None:
        raise UnmappedContentTypeError(
            f"{type(block).__name__} is not a content block: it has no content_type"
        )
    return AgentContentType(tag)


def encode_block(
    block: BaseModel, mapping: dict[AgentContentType, type[BaseModel]] | None = None
) -> tuple[str, str]:
    """``(content_type, payload)`` for storage: raw text for TEXT, model JSON otherwise."""
    mapping = AGENT_CONTENT_MODEL_BY_TYPE if mapping is None else mapping
    if isinstance(block, AgentTextContent):
        return AgentContentType.TEXT.value, block.text
    content_type = getattr(block, "content_type", None)
    model = mapping.get(content_type) if content_type is not None else None
    if model is None or type(block) is not model:
        raise UnmappedContentTypeError(
            f"cannot persist {type(block).__name__} (content_type {content_type!r}): it has no "
            "entry in AGENT_CONTENT_MODEL_BY_TYPE"
        )
    return str(content_type), block.model_dump_json()


def decode_block(
    content_type: str,
    payload: str,
    mapping: dict[AgentContentType, type[BaseModel]] | None = None,
) -> Any:
    """Rebuild a block from :func:`encode_block` output; unknown types raise, never vanish."""
    mapping = AGENT_CONTENT_MODEL_BY_TYPE if mapping is None else mapping
    if content_type == AgentContentType.TEXT.value:
        return AgentTextContent(text=payload)
    try:
        model = mapping[AgentContentType(content_type)]
    except (ValueError, KeyError):
        raise UnmappedContentTypeError(
            f"stored content_type {content_type!r} has no model in AGENT_CONTENT_MODEL_BY_TYPE"
        ) from None
    return model.model_validate_json(payload)


def storable(text: str, field: str) -> str:
    """``text`` if it can be stored (encoded as UTF-8), else UnencodableTextError naming
    ``field``: the database drivers would raise UnicodeEncodeError mid-transaction."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise UnencodableTextError(
                f"{field} contains text that cannot be encoded as UTF-8 ({error.reason} at "
                f"character {error.start}); send valid Unicode text only; nothing was written"
            ) from None
    return text


def encode_blocks(blocks: list[Any]) -> str:
    """A message's blocks as one JSON text: a list of ``[content_type, payload]`` pairs.

    Text that cannot be stored raises UnencodableTextError naming the block."""
    pairs: list[tuple[str, str]] = []
    for index, block in enumerate(blocks):
        try:
            content_type, payload = encode_block(block)
        except PydanticSerializationError as error:  # a lone surrogate in a model's field
            raise UnencodableTextError(
                f"content[{index}] ({type(block).__name__}) cannot be stored: {error}; send "
                "valid Unicode text only; nothing was written"
            ) from None
        pairs.append((content_type, storable(payload, f"content[{index}] ({content_type})")))
    return json.dumps(pairs, ensure_ascii=False)


def decode_blocks(text: str) -> list[Any]:
    """Inverse of :func:`encode_blocks`; a malformed column raises CorruptRecordError."""
    return [decode_block(content_type, payload) for content_type, payload in decode_pairs(text)]


def decode_pairs(text: str) -> list[list[str]]:
    """The stored ``[content_type, payload]`` pairs of a content column, not decoded yet."""
    try:
        pairs: Any = json.loads(text)
    except json.JSONDecodeError as error:
        raise CorruptRecordError(f"stored content is not JSON: {error}") from None
    # Exact types (what json.loads makes), checked inline: a reply streaming in is read and
    # grown whole once per piece, so this runs for every block of it each time.
    if pairs.__class__ is not list or not all(
        pair.__class__ is list
        and len(pair) == 2
        and pair[0].__class__ is str
        and pair[1].__class__ is str
        for pair in pairs
    ):
        raise CorruptRecordError("stored content is not a list of [content_type, payload] pairs")
    return cast("list[list[str]]", pairs)  # every item was checked just above


def synthesize_tool_result_payload(
    raw_response: dict[str, Any] | None,
) -> str | dict[str, Any] | list[Any] | None:
    """Rebuild a tool's output from a legacy ``raw_response``.

    Two legacy shapes exist. A provider envelope ``{"toolResult": {"content": [...]}}`` holds
    the output as its first ``{"text": ...}`` or ``{"json": ...}`` block (image blocks may
    follow and are ignored); a JSON value that is exactly ``{"items": [...]}`` was wrapped
    only because the provider refused top-level arrays, and is unwrapped to the array. Such a
    dict returned by a tool for real cannot be told apart and is unwrapped too. Any other dict
    (no ``toolResult`` key) is the tool's output itself and is returned as it is.

    Returns None for None, a malformed envelope, or an envelope without text or JSON.
    """
    if not isinstance(raw_response, dict):
        return None
    if "toolResult" not in raw_response:
        return raw_response
    envelope: object = raw_response["toolResult"]
    blocks: object = (
        cast("dict[str, Any]", envelope).get("content") if isinstance(envelope, dict) else None
    )
    if not isinstance(blocks, list):
        return None
    for item in cast("list[object]", blocks):
        if not isinstance(item, dict):
            continue
        block = cast("dict[str, Any]", item)  # decoded JSON: its keys are strings
        if isinstance(block.get("text"), str):
            return str(block["text"])
        if "json" in block:
            value: object = block["json"]
            if isinstance(value, dict) and set(cast("dict[str, Any]", value)) == {"items"}:
                items: object = cast("dict[str, Any]", value)["items"]
                if isinstance(items, list):
                    return cast("list[object]", items)  # decoded JSON: items of any type
            if isinstance(value, dict | list | str):
                return cast("dict[str, Any] | list[Any] | str", value)
    return None
