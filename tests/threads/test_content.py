"""Content blocks: one map drives both directions of persistence; legacy tool results resolve."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from roboz.threads import (
    AGENT_CONTENT_MODEL_BY_TYPE,
    AgentClientContextEntry,
    AgentCompressionFillerContent,
    AgentContent,
    AgentContentType,
    AgentDeletedContent,
    AgentErrorContent,
    AgentTextContent,
    AgentToolResultContent,
    AgentToolUseContent,
    ClientViewingContext,
    UnmappedContentTypeError,
    synthesize_tool_result_payload,
)
from roboz.threads.content import (
    check_content_map,
    content_type_of,
    content_union_members,
    decode_block,
    decode_blocks,
    encode_block,
    encode_blocks,
)
from roboz.threads.errors import CorruptRecordError

SAMPLES: dict[AgentContentType, BaseModel] = {
    AgentContentType.TOOL_USE: AgentToolUseContent(
        tool_use_id="tu_1", tool_name="search", input={"q": "ü"}, raw_request={"raw": [1, 2]}
    ),
    AgentContentType.TOOL_RESULT: AgentToolResultContent(
        tool_use_id="tu_1",
        tool_name="search",
        runtime_ms=12,
        status="success",
        payload=[{"hit": 1}],
        raw_response={"toolResult": {"content": [{"text": "old"}]}},
    ),
    AgentContentType.ERROR: AgentErrorContent(error_message="boom", error_code="E42"),
    AgentContentType.DELETED: AgentDeletedContent(),
    AgentContentType.COMPRESSION_FILLER: AgentCompressionFillerContent(),
    AgentContentType.CLIENT_CONTEXT: AgentClientContextEntry(
        context=ClientViewingContext(
            dataset_ids=["ds_1"], device_ids=["any/thing 1"], display_time_anchor_ns=5
        )
    ),
}
CONTENT = TypeAdapter(AgentContent)


def test_every_mapped_type_has_a_sample_and_text_is_not_mapped() -> None:
    assert set(SAMPLES) == set(AGENT_CONTENT_MODEL_BY_TYPE)
    assert AgentContentType.TEXT not in AGENT_CONTENT_MODEL_BY_TYPE
    assert set(AgentContentType) == {*AGENT_CONTENT_MODEL_BY_TYPE, AgentContentType.TEXT}


@pytest.mark.parametrize("content_type", list(AGENT_CONTENT_MODEL_BY_TYPE))
def test_round_trip_through_the_map(content_type: AgentContentType) -> None:
    model = AGENT_CONTENT_MODEL_BY_TYPE[content_type]
    block = SAMPLES[content_type]
    assert type(block) is model and content_type_of(block) is content_type
    again = model.model_validate_json(block.model_dump_json())
    assert again == block
    # The union dispatches on the discriminator to the same class.
    via_union = CONTENT.validate_json(block.model_dump_json())
    assert type(via_union) is model and via_union == block
    # Storage encoding uses the same map both ways.
    stored_type, payload = encode_block(block)
    assert stored_type == content_type.value
    assert decode_block(stored_type, payload) == block


def test_text_is_stored_as_raw_text_and_read_without_a_discriminator() -> None:
    block = AgentTextContent(text='{"looks": "like json"} ü')
    assert encode_block(block) == ("text", '{"looks": "like json"} ü')
    assert decode_block("text", block.text) == block
    assert CONTENT.validate_python({"text": "hi"}) == AgentTextContent(text="hi")
    assert CONTENT.validate_python({"content_type": "text", "text": "hi"}) == AgentTextContent(
        text="hi"
    )


def test_a_whole_message_body_round_trips() -> None:
    blocks = [AgentTextContent(text="a"), *SAMPLES.values()]
    assert decode_blocks(encode_blocks(blocks)) == blocks


def test_union_member_without_a_map_entry_fails_loudly() -> None:
    class AgentNewContent(BaseModel):
        content_type: Literal["brand_new"] = "brand_new"
        value: int = 1

    members = (*content_union_members(), AgentNewContent)
    with pytest.raises(UnmappedContentTypeError, match="AgentNewContent"):
        check_content_map(members, AGENT_CONTENT_MODEL_BY_TYPE)
    # Writing such a block fails instead of dropping it.
    with pytest.raises(UnmappedContentTypeError, match="brand_new"):
        encode_block(AgentNewContent())
    # And a map that lost an entry is caught for an existing member too.
    partial = dict(AGENT_CONTENT_MODEL_BY_TYPE)
    del partial[AgentContentType.ERROR]
    with pytest.raises(UnmappedContentTypeError, match="AgentErrorContent"):
        check_content_map(content_union_members(), partial)
    with pytest.raises(UnmappedContentTypeError):
        encode_block(SAMPLES[AgentContentType.ERROR], partial)


def test_the_real_union_and_map_agree() -> None:
    check_content_map(content_union_members(), AGENT_CONTENT_MODEL_BY_TYPE)
    assert len(content_union_members()) == len(AGENT_CONTENT_MODEL_BY_TYPE) + 1


def test_unknown_content_type_is_a_clear_error() -> None:
    with pytest.raises(ValidationError, match="mystery"):
        CONTENT.validate_python({"content_type": "mystery", "x": 1})
    with pytest.raises(ValidationError, match="neither a content_type nor a text"):
        CONTENT.validate_python({"x": 1})
    with pytest.raises(UnmappedContentTypeError, match="mystery"):
        decode_block("mystery", "{}")


def test_malformed_stored_content_is_a_clear_error() -> None:
    with pytest.raises(CorruptRecordError, match="not JSON"):
        decode_blocks("[not json")
    with pytest.raises(CorruptRecordError, match="pairs"):
        decode_blocks('[["text"]]')
    with pytest.raises(ValidationError):
        decode_block("tool_use", '{"tool_name": "x"}')  # tool_use_id missing


def test_client_context_accepts_the_wire_name() -> None:
    block = AgentClientContextEntry.model_validate(
        {"content_type": "client_context", "client_context": {"file_ids": ["f1"]}}
    )
    assert block.context.file_ids == ["f1"]
    assert "text" not in block.model_dump()  # invisible to text renderers


# -- legacy tool results --------------------------------------------------------------------


def envelope(*blocks: Any) -> dict[str, Any]:
    return {"toolResult": {"toolUseId": "tu", "status": "success", "content": list(blocks)}}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, None),
        (envelope({"text": "plain"}), "plain"),
        (envelope({"json": {"a": 1}}), {"a": 1}),
        (envelope({"json": {"items": [1, 2]}}), [1, 2]),
        # Only the exact single-key {"items": [...]} form is unwrapped.
        (envelope({"json": {"items": [1], "more": 2}}), {"items": [1], "more": 2}),
        (envelope({"json": {"items": "not a list"}}), {"items": "not a list"}),
        (envelope({"json": [3, 4]}), [3, 4]),
        (envelope({"text": "first"}, {"image": {"format": "png"}}), "first"),
        (envelope({"image": {"format": "png"}}), None),
        (envelope(), None),
        ({"toolResult": "broken"}, None),
        ({"toolResult": {"content": "broken"}}, None),
        # A bare dict is the tool's own output, returned as it is (no unwrap).
        ({"rows": 3}, {"rows": 3}),
        ({"items": [1]}, {"items": [1]}),
    ],
)
def test_synthesize_tool_result_payload(raw: Any, expected: Any) -> None:
    assert synthesize_tool_result_payload(raw) == expected


def test_resolve_payload_prefers_payload_then_legacy_envelope() -> None:
    base = {"tool_use_id": "t", "tool_name": "n", "runtime_ms": 1, "status": "success"}
    both = AgentToolResultContent(**base, payload="new", raw_response=envelope({"text": "old"}))
    assert both.resolve_payload() == "new"
    legacy = AgentToolResultContent(**base, raw_response=envelope({"json": {"items": [7]}}))
    assert legacy.resolve_payload() == [7]
    assert AgentToolResultContent(**base).resolve_payload() is None
    # An old row without payload still validates and resolves after a JSON round trip.
    old_row = '{"content_type":"tool_result","tool_use_id":"t","tool_name":"n","runtime_ms":1,"status":"success","raw_response":{"toolResult":{"content":[{"text":"hello"}]}}}'
    assert AgentToolResultContent.model_validate_json(old_row).resolve_payload() == "hello"
