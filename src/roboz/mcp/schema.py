"""JSON Schema (as MCP servers publish it) -> pydantic models RoboZ tools can take and return.

Covers what tool schemas use in practice: the scalar types, ``null``, type lists, ``enum`` and
``const`` (as Literal), arrays, nested objects (as nested models), ``anyOf``/``oneOf`` (as
unions), local ``$ref`` into ``$defs``/``definitions``, defaults and descriptions. Anything it
cannot express precisely becomes ``Any`` rather than a wrong constraint: the server validates
its own arguments anyway, so a looser model costs a round trip, a stricter one a lost call.
"""

from __future__ import annotations

import keyword
import re
from typing import Any, Literal, TypeGuard, Union, cast

from pydantic import BaseModel, ConfigDict, Field, create_model

from roboz.models import Empty

_SCALARS: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "null": type(None),
}
# Names a generated field cannot have as a Python attribute: pydantic's own namespace and our
# runtime metadata. They are kept as aliases, so the LLM and the server still see the real name.
_RESERVED = {"truncation", "model_config", "model_fields", "schema", "json", "dict", "copy"}
_NOT_IDENT = re.compile(r"\W")


class SchemaError(ValueError):
    """A tool's JSON schema cannot be turned into a model; the message names tool and place."""


class MCPValue(Empty):
    """Base of generated tool inputs and structured outputs: fields may carry the schema's
    own names as aliases (names that are not Python identifiers, or clash with pydantic's)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def model_from_schema(
    schema: dict[str, Any], name: str, *, base: type[MCPValue] = MCPValue
) -> type[MCPValue]:
    """A model (subclass of ``base``) whose fields are the object schema's properties."""
    if schema.get("type", "object") != "object":
        raise SchemaError(f"{name}: a tool schema must describe an object, got {schema!r}")
    builder = _Builder(schema, name)
    return builder.object_model(schema, name, base)


class _Nested(BaseModel):
    """Base of nested objects: extra keys stay, as JSON Schema allows them unless it says no."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class _Builder:
    def __init__(self, root: dict[str, Any], name: str) -> None:
        self.root = root
        self.name = name
        self.models: dict[str, type[BaseModel]] = {}
        self.resolving: set[str] = set()

    def object_model(self, schema: dict[str, Any], name: str, base: type[BaseModel]) -> type[Any]:
        properties: dict[str, Any] = schema.get("properties") or {}
        required: set[str] = set(schema.get("required") or ())
        fields: dict[str, Any] = {}
        for prop, subschema in properties.items():
            subschema = _as_object(subschema)
            annotation = self.annotation(subschema, f"{name}_{_identifier(prop)}")
            extra: dict[str, Any] = {}
            if subschema.get("description"):
                extra["description"] = subschema["description"]
            attribute = _identifier(prop)
            if attribute != prop:
                extra["alias"] = prop
            if prop in required:
                default: Any = ...
            else:
                default = subschema.get("default")
                if default is None:
                    annotation = annotation | None
            fields[attribute] = (annotation, Field(default, **extra))
        if base is _Nested:
            forbid = schema.get("additionalProperties") is False
            config = ConfigDict(extra="forbid" if forbid else "allow", populate_by_name=True)
            return create_model(_class_name(name), __config__=config, **fields)
        return create_model(_class_name(name), __base__=base, **fields)

    def annotation(self, schema: dict[str, Any], name: str) -> Any:
        if "$ref" in schema:
            return self.reference(schema["$ref"], name)
        if "const" in schema:
            return Literal[schema["const"]]
        if schema.get("enum"):
            return Literal[tuple(schema["enum"])]
        for key in ("anyOf", "oneOf"):
            if schema.get(key):
                members = [
                    self.annotation(option, f"{name}_{index}")
                    for index, option in enumerate(schema[key])
                    if _is_object(option)
                ]
                return Union[tuple(members)] if members else Any  # noqa: UP007
        if schema.get("allOf") and len(schema["allOf"]) == 1:
            return self.annotation(schema["allOf"][0], name)
        kind = schema.get("type")
        if _is_array(kind):
            members = [self.annotation({**schema, "type": k}, name) for k in kind]
            return Union[tuple(members)] if members else Any  # noqa: UP007
        if kind in _SCALARS:
            return _SCALARS[kind]
        if kind == "array":
            items = schema.get("items")
            if not _is_object(items):
                return list
            item: Any = self.annotation(items, f"{name}_item")
            return list[item]
        if kind == "object" or "properties" in schema:
            if schema.get("properties"):
                return self.object_model(schema, name, _Nested)
            extra = schema.get("additionalProperties")
            if _is_object(extra):
                value: Any = self.annotation(extra, f"{name}_value")
                return dict[str, value]
            return dict[str, Any]
        return Any

    def reference(self, ref: str, name: str) -> Any:
        match = re.fullmatch(r"#/(\$defs|definitions)/(.+)", ref)
        if match is None:
            raise SchemaError(f"{self.name}: only local $ref to $defs is supported, got {ref!r}")
        key = match.group(2)
        definitions: dict[str, Any] = self.root.get(match.group(1)) or {}
        target: object = definitions.get(key)
        if not _is_object(target):
            raise SchemaError(f"{self.name}: $ref {ref!r} points to nothing")
        if key in self.models:
            return self.models[key]
        if key in self.resolving:
            return dict[str, Any]  # a recursive type: accept its JSON as is
        self.resolving.add(key)
        try:
            annotation = self.annotation(target, f"{self.name}_{_identifier(key)}")
        finally:
            self.resolving.discard(key)
        if _is_model(annotation):
            self.models[key] = annotation
        return annotation


def _as_object(value: object) -> dict[str, Any]:
    """A JSON object of a schema, or an empty one for anything else."""
    return cast("dict[str, Any]", value) if isinstance(value, dict) else {}


def _is_object(value: object) -> TypeGuard[dict[str, Any]]:
    return isinstance(value, dict)


def _is_array(value: object) -> TypeGuard[list[Any]]:
    return isinstance(value, list)


def _is_model(annotation: object) -> TypeGuard[type[BaseModel]]:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _identifier(name: str) -> str:
    attribute = _NOT_IDENT.sub("_", name) or "_"
    if attribute[0].isdigit():
        attribute = "f_" + attribute
    if keyword.iskeyword(attribute) or attribute in _RESERVED or attribute.startswith("model_"):
        attribute += "_"
    return attribute


def _class_name(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in _identifier(name).split("_") if part)
