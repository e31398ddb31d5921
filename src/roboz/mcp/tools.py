"""MCP tools as RoboZ tools: typed input from the JSON schema, typed output, guarded calls.

Every MCP tool returns either its result (``Str`` for text, ``StrImage`` when images came
back, a model generated from ``outputSchema`` for structured results) or ``MCPToolError``
(a ``Str`` naming server and tool), which is how a refused, failed, timed out or dead call
reaches the LLM without ending the run. A native tool chained after an MCP tool takes ``Str``
(or ``Empty``) and uses ``chain_condition=succeeded`` to skip failures.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from mcp import types
from pydantic import Field, ValidationError

from roboz.mcp.client import MCPError
from roboz.mcp.permissions import Rules, Verdict, authorize, check_rules
from roboz.mcp.schema import MCPValue, SchemaError, model_from_schema
from roboz.models import Empty, Image, Message, Str, StrImage
from roboz.tools import Tool

if TYPE_CHECKING:
    from roboz.mcp.client import MCPServer


class MCPToolError(Str):
    """An MCP call that did not produce a result: refused, failed, timed out, server gone."""

    server: str = ""
    tool: str = ""
    ok: bool = Field(default=False, exclude=True)


def succeeded(output: object) -> bool:
    """Chain condition: the MCP call produced a result (not an MCPToolError)."""
    return not isinstance(output, MCPToolError)


def build_tools(
    server: MCPServer,
    *,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    rules: Rules | None = None,
    prefix: str = "",
) -> list[Tool]:
    """The server's tools as RoboZ tools, in the server's order.

    ``include`` and ``exclude`` take tool names or fnmatch patterns (as the server names
    them); ``rules`` map name patterns to "allow", "deny" or "ask"; ``prefix`` is put in front
    of every RoboZ tool name (to keep two servers' tools apart).
    """
    checked = check_rules(rules)
    listing = server.list_tools()
    names = [tool.name for tool in listing]
    for pattern in [*(include or ()), *exclude]:
        if not any(fnmatch.fnmatchcase(name, pattern) for name in names):
            raise ValueError(
                f"MCP server {server.name!r} has no tool matching {pattern!r}; it has: "
                f"{', '.join(names) or '(none)'}"
            )
    chosen = [
        tool
        for tool in listing
        if (include is None or any(fnmatch.fnmatchcase(tool.name, p) for p in include))
        and not any(fnmatch.fnmatchcase(tool.name, p) for p in exclude)
    ]
    return [mcp_tool(server, tool, checked, prefix=prefix) for tool in chosen]


def mcp_tool(
    server: MCPServer, spec: types.Tool, rules: Mapping[str, Verdict], *, prefix: str = ""
) -> Tool:
    """One MCP tool as a RoboZ Tool."""
    name = prefix + spec.name
    try:
        input_type = model_from_schema(dict(spec.inputSchema or {}), f"{name}_input")
        output_type: type[Empty] = (
            model_from_schema(dict(spec.outputSchema), f"{name}_output")
            if spec.outputSchema and not _wrapped_text(spec.outputSchema)
            else Str
        )
    except SchemaError as error:
        raise SchemaError(f"MCP server {server.name!r} tool {spec.name!r}: {error}") from None
    remote = spec.name
    structured = output_type is not Str

    def call(input: Empty, messages: list[Message]) -> Empty:
        arguments = input.model_dump(
            mode="json", by_alias=True, exclude_unset=True, exclude={"truncation"}
        )
        denial = authorize(rules, server.name, remote, arguments)
        if denial is not None:
            return _failure(server.name, remote, f"refused: {denial}; the server was not called")
        try:
            result = server.call_tool(remote, arguments)
        except MCPError as error:
            return _failure(server.name, remote, str(error))
        return _convert(server.name, remote, result, output_type if structured else None)

    description = (spec.description or "").strip() or spec.title or spec.name
    return Tool(
        name=name,
        instruction=f"{description}\n(MCP tool {spec.name!r} of server {server.name!r})",
        input_type=input_type,
        output_types=(output_type, MCPToolError),
        func=call,
    )


def _wrapped_text(schema: dict[str, Any]) -> bool:
    """SDK servers wrap a plain ``-> str`` as ``{"result": string}``; that is text, and text
    chains into any tool that takes ``Str``."""
    properties: dict[str, Any] = schema.get("properties") or {}
    result: Any = properties.get("result")
    return (
        list(properties) == ["result"]
        and isinstance(result, dict)
        and (cast("dict[str, Any]", result).get("type") == "string")
    )


def _failure(server: str, tool: str, why: str) -> MCPToolError:
    return MCPToolError(
        value=f"MCP tool {tool!r} on server {server!r} failed: {why}", server=server, tool=tool
    )


def _convert(
    server: str, tool: str, result: types.CallToolResult, structured: type[Empty] | None
) -> Empty:
    text, images, notes = _content(result.content)
    if result.isError:
        return _failure(server, tool, f"the tool reported an error: {text or '(no message)'}")
    if structured is not None:
        if result.structuredContent is None:
            return _failure(server, tool, "it promised a structured result and sent none")
        try:
            return structured.model_validate(result.structuredContent)
        except ValidationError as error:
            return _failure(server, tool, f"its structured result does not fit its schema: {error}")
    if notes:
        text = "\n".join([text, *notes]) if text else "\n".join(notes)
    if images:
        return StrImage(value=text, images=images)
    return Str(value=text)


def _content(blocks: Sequence[Any]) -> tuple[str, list[Image], list[str]]:
    texts: list[str] = []
    images: list[Image] = []
    notes: list[str] = []
    for block in blocks:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
        elif isinstance(block, types.ImageContent):
            try:
                images.append(Image(url=f"data:{block.mimeType};base64,{block.data}"))
            except ValueError as error:
                notes.append(f"[an image could not be used: {error}]")
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                texts.append(resource.text)
            else:
                notes.append(f"[binary resource {resource.uri} ({resource.mimeType or 'unknown'})]")
        elif isinstance(block, types.ResourceLink):
            notes.append(f"[resource {block.uri}: {block.name}]")
        else:
            notes.append(f"[{getattr(block, 'type', 'unknown')} content omitted]")
    return "\n".join(texts), images, notes


__all__ = ["MCPToolError", "MCPValue", "build_tools", "mcp_tool", "succeeded"]
