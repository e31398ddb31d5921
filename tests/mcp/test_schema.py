"""JSON schemas of MCP tools become pydantic models that accept and reject what they say."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from roboz.mcp import MCPValue, SchemaError, model_from_schema
from roboz.models import Empty

SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "what to look for"},
        "mode": {"enum": ["fast", "exact"]},
        "limit": {"type": ["integer", "null"]},
        "ratio": {"type": "number", "default": 0.5},
        "tags": {"type": "array", "items": {"type": "string"}},
        "filter": {"$ref": "#/$defs/Filter"},
        "point": {
            "type": "object",
            "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
            "required": ["x", "y"],
            "additionalProperties": False,
        },
        "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        "class": {"type": "string"},
        "dash-name": {"type": "boolean"},
        "labels": {"type": "object", "additionalProperties": {"type": "integer"}},
    },
    "required": ["query", "mode"],
    "$defs": {
        "Filter": {
            "type": "object",
            "properties": {"depth": {"type": "integer"}},
            "required": ["depth"],
        }
    },
}


def test_required_optional_enum_nested_and_arrays() -> None:
    model = model_from_schema(SCHEMA, "search_input")
    assert issubclass(model, MCPValue) and issubclass(model, Empty)
    value = model.model_validate(
        {
            "query": "q",
            "mode": "fast",
            "tags": ["a", "b"],
            "filter": {"depth": 2},
            "point": {"x": 1, "y": 2},
            "either": "text",
            "class": "c",
            "dash-name": True,
            "labels": {"a": 1},
        }
    )
    sent = value.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude={"truncation"})
    assert sent == {
        "query": "q",
        "mode": "fast",
        "tags": ["a", "b"],
        "filter": {"depth": 2},
        "point": {"x": 1, "y": 2},
        "either": "text",
        "class": "c",
        "dash-name": True,
        "labels": {"a": 1},
    }
    assert model.model_validate({"query": "q", "mode": "exact"}).ratio == 0.5


@pytest.mark.parametrize(
    "bad",
    [
        {"mode": "fast"},  # query is required
        {"query": "q", "mode": "slow"},  # not in the enum
        {"query": "q", "mode": "fast", "tags": "a"},  # not an array
        {"query": "q", "mode": "fast", "filter": {}},  # nested required field
        {"query": "q", "mode": "fast", "point": {"x": 1, "y": 2, "z": 3}},  # no extra keys
        {"query": "q", "mode": "fast", "labels": {"a": "x"}},  # map values are integers
        {"query": "q", "mode": "fast", "unknown": 1},  # tool inputs take no extra keys
    ],
)
def test_invalid_arguments_are_rejected(bad: dict[str, object]) -> None:
    model = model_from_schema(SCHEMA, "search_input")
    with pytest.raises(ValidationError):
        model.model_validate(bad)


def test_the_llm_sees_the_schema_names() -> None:
    schema = model_from_schema(SCHEMA, "search_input").model_json_schema()
    assert {"class", "dash-name", "query"} <= set(schema["properties"])
    assert "truncation" not in schema["properties"]
    assert schema["properties"]["query"]["description"] == "what to look for"


def test_non_object_and_remote_refs_are_clear_errors() -> None:
    with pytest.raises(SchemaError, match="must describe an object"):
        model_from_schema({"type": "string"}, "x")
    with pytest.raises(SchemaError, match="only local"):
        model_from_schema(
            {"type": "object", "properties": {"a": {"$ref": "http://example/s.json"}}}, "x"
        )
