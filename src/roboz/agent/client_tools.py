"""Client tools: offered to the LLM like native tools, executed by the client, never here.

A ``ClientToolSpec`` becomes a :class:`~roboz.tools.Tool` whose input is checked against the
spec's JSON schema (the subset below, checked when the run starts so a schema we cannot
enforce is refused instead of silently trusted). When the LLM calls one, the run stops with a
:class:`ClientToolTurn`; the client runs the tool and submits the result with
``Agent.submit_tool_results``, which records it and resumes the run. The result flows on as a
:class:`ClientToolResult`, so native tools can be chained to a client tool like to any tool.
"""

# JSON Schema documents and the values they check are untyped JSON by nature; the checks below
# narrow them at run time, which strict mode's "unknown type" reports cannot see.
# pyright: reportUnknownVariableType=false, reportUnknownArgumentType=false
# pyright: reportUnknownMemberType=false, reportUnknownLambdaType=false

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import ConfigDict, model_validator

from roboz.agent.errors import AgentConfigurationError
from roboz.models import Empty, Message
from roboz.threads import ClientToolSpec
from roboz.tools import Tool

_ANNOTATIONS = {"description", "title", "default", "examples", "$schema", "$comment"}
_KEYWORDS = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
} | _ANNOTATIONS
_TYPES = {"object", "array", "string", "integer", "number", "boolean", "null"}


class ClientToolError(ValueError):
    """Results that do not answer the pending client tool uses, or a thread not waiting for
    any; nothing was recorded."""


class ClientToolResult(Empty):
    """What a client tool returned, as it flows to tools chained to the client tool."""

    tool_use_id: str
    tool_name: str
    payload: Any = None


@dataclass(frozen=True)
class ClientToolUse:
    """A call of a client tool the LLM made and the client has not answered yet."""

    tool_use_id: str
    tool_name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class ClientToolTurn:
    """The run is waiting for the client: run ``pending`` and submit their results with
    ``agent.submit_tool_results(thread_id, {tool_use_id: result, ...})``."""

    thread_id: str | None
    pending: list[ClientToolUse]
    messages: list[Message] = field(repr=False)


def check_schema(schema: object, where: str) -> None:
    """Refuse a schema that uses keywords this validator does not enforce."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise AgentConfigurationError(f"{where}: a JSON schema must be an object or a boolean")
    unknown = set(schema) - _KEYWORDS
    if unknown:
        raise AgentConfigurationError(
            f"{where}: JSON schema keywords {sorted(unknown)} are not supported for client "
            f"tools; use only {sorted(_KEYWORDS - _ANNOTATIONS)}"
        )
    kinds = schema.get("type")
    for kind in kinds if isinstance(kinds, list) else [kinds] if kinds is not None else []:
        if kind not in _TYPES:
            raise AgentConfigurationError(f"{where}: unknown JSON schema type {kind!r}")
    for name, sub in (schema.get("properties") or {}).items():
        check_schema(sub, f"{where}.{name}")
    for key in ("items", "additionalProperties"):
        if key in schema:
            check_schema(schema[key], f"{where}.{key}")


def _is(kind: str, value: Any) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        if isinstance(value, float):
            return value.is_integer()
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list)
    return isinstance(value, dict)


def schema_errors(schema: Any, value: Any, where: str = "input") -> list[str]:
    """Every way ``value`` breaks ``schema`` (empty when it fits)."""
    if schema is True:
        return []
    if schema is False:
        return [f"{where} is not allowed"]
    kinds = schema.get("type")
    if kinds is not None:
        allowed = kinds if isinstance(kinds, list) else [kinds]
        if not any(_is(kind, value) for kind in allowed):
            return [f"{where} must be {' or '.join(allowed)}, got {json.dumps(value)[:80]}"]
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where} must be one of {json.dumps(schema['enum'])}")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{where} must be {json.dumps(schema['const'])}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        for key, ok in (
            ("minimum", lambda b: value >= b),
            ("maximum", lambda b: value <= b),
            ("exclusiveMinimum", lambda b: value > b),
            ("exclusiveMaximum", lambda b: value < b),
        ):
            if key in schema and not ok(schema[key]):
                errors.append(f"{where} breaks {key} {schema[key]}")
    if isinstance(value, str | list):
        noun = "characters" if isinstance(value, str) else "items"
        prefix = "Length" if isinstance(value, str) else "Items"
        if f"min{prefix}" in schema and len(value) < schema[f"min{prefix}"]:
            errors.append(f"{where} needs at least {schema[f'min{prefix}']} {noun}")
        if f"max{prefix}" in schema and len(value) > schema[f"max{prefix}"]:
            errors.append(f"{where} allows at most {schema[f'max{prefix}']} {noun}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            errors.extend(schema_errors(schema["items"], item, f"{where}[{index}]"))
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for name in schema.get("required") or ():
            if name not in value:
                errors.append(f"{where} lacks the required field {name!r}")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in properties:
                errors.extend(schema_errors(properties[name], item, f"{where}.{name}"))
            else:
                errors.extend(schema_errors(extra, item, f"{where}.{name}"))
    return errors


class ClientToolInput(Empty):
    """Arguments of a client tool: any fields, checked against the spec's JSON schema."""

    model_config = ConfigDict(extra="allow")
    client_schema: ClassVar[dict[str, Any]] = {}

    @model_validator(mode="before")
    @classmethod
    def _fits_schema(cls, data: Any) -> Any:
        errors = schema_errors(cls.client_schema, data if data is not None else {})
        if errors:
            raise ValueError("; ".join(errors))
        return data

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        # The LLM is shown the client's own schema, not one derived from this class.
        return dict(cls.client_schema)


def _executed_by_the_client(input: Empty, messages: list[Message]) -> ClientToolResult:
    raise RuntimeError("a client tool is executed by the client, never by the agent")


def client_tool(spec: ClientToolSpec) -> Tool:
    """The tool the LLM is offered for ``spec``."""
    where = f"client tool {spec.name!r}"
    check_schema(spec.input_schema, where)
    if spec.input_schema.get("type", "object") != "object":
        raise AgentConfigurationError(f"{where}: the input schema must describe an object")
    input_type = type(
        f"{spec.name}_input", (ClientToolInput,), {"client_schema": dict(spec.input_schema)}
    )
    return Tool(
        name=spec.name,
        instruction=spec.description,
        input_type=input_type,
        output_types=(ClientToolResult,),
        func=_executed_by_the_client,
    )


def client_tools(specs: Sequence[ClientToolSpec | Mapping[str, Any]]) -> list[Tool]:
    tools = [
        client_tool(s if isinstance(s, ClientToolSpec) else ClientToolSpec.model_validate(s))
        for s in specs
    ]
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise AgentConfigurationError(f"client tool names must be unique: {names}")
    return tools
