"""Raw text is exchanged only with the explicit opt-in ``@tool(raw=True)``: the LLM sees the
tool's text as is; without the opt-in a str is refused with an error that names it."""

from __future__ import annotations

from typing import Any, cast

import pytest

from roboz import Agent, factory, tool
from roboz.agent import ToolExecutionError
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Message, RawText, Stop, Str
from roboz.tools import ToolDefinitionError, ToolOutputError, stop

LISTING = "report.md\nnotes/\n"


@tool(raw=True)
def list_files(input: Empty, messages: list[Message]) -> str:
    """List the files, one per line."""
    return LISTING


@tool(raw=True)
async def read_page(input: Str, messages: list[Message]) -> str:
    """Read a page and return its text."""
    return f"<html>{input.value}</html>"


def test_the_llm_sees_a_raw_tools_text_as_is() -> None:
    endpoint = MockLLMEndpoint(
        [{"action": "list_files"}, {"action": "read_page", "value": "hi"}, {"action": "stop"}]
    )
    agent = Agent(name="raw", agent_endpoint=endpoint, tools=[list_files, read_page, stop])
    _, messages = agent.invoke()
    results = [m for m in messages if m.message_kind == "tool_result"]
    assert [m.content for m in results[:2]] == [LISTING, "<html>hi</html>"]
    # Not the JSON of a value: the text itself, after the caller's label.
    assert endpoint.requests[1][-1]["content"] == f"[list_files result] {LISTING}"


def test_a_str_child_chains_to_a_raw_tool() -> None:
    @tool(chained_to=list_files)
    def count_lines(input: Str, messages: list[Message]) -> Stop:
        """Count the lines."""
        return Stop(value=len(input.value.splitlines()))

    assert isinstance(list_files.run(Empty(), []), RawText)
    agent = Agent(
        name="raw",
        agent_endpoint=MockLLMEndpoint([{"action": "list_files"}]),
        tools=[list_files, count_lines],
    )
    assert agent.invoke()[0].value == 2


def test_without_the_opt_in_a_str_is_refused_with_the_opt_in_named() -> None:
    @tool
    def sloppy(input: Empty, messages: list[Message]) -> Str:
        """Returns text without a value model."""
        return cast("Any", "plain text")

    with pytest.raises(ToolOutputError, match=r"opt in with @tool\(raw=True\) and return str"):
        sloppy.run(Empty(), [])
    with pytest.raises(ToolDefinitionError, match=r"for raw text, use @tool\(raw=True\)"):

        @tool  # type: ignore[arg-type]
        def annotated(input: Empty, messages: list[Message]) -> str:
            """Annotated str without the opt-in."""
            return "x"


def test_a_raw_tool_returns_only_text() -> None:
    with pytest.raises(ToolDefinitionError, match="annotate it -> str"):

        @tool(raw=True)  # type: ignore[arg-type]
        def typed(input: Empty, messages: list[Message]) -> Str:
            """Raw but typed."""
            return Str(value="x")

    @tool(raw=True)
    def liar(input: Empty, messages: list[Message]) -> str:
        """Says str, returns a dict."""
        return cast("Any", {"not": "text"})

    agent = Agent(name="raw", agent_endpoint=MockLLMEndpoint([{"action": "liar"}]), tools=[liar])
    with pytest.raises(ToolExecutionError, match=r"is raw \(raw=True\), so it returns str"):
        agent.invoke()


def test_a_raw_factory_builds_raw_tools() -> None:
    @factory(raw=True)
    def greet(input: Str, messages: list[Message], ctx: str) -> str:
        """Greet someone, as text."""
        return f"{ctx}, {input.value}!"

    @factory(raw=True)
    async def agreet(input: Str, messages: list[Message], ctx: str) -> str:
        """Greet someone asynchronously, as text."""
        return f"{ctx}, {input.value}?"

    endpoint = MockLLMEndpoint(
        [
            {"action": "greet", "value": "Ada"},
            {"action": "agreet", "value": "Bob"},
            {"action": "stop"},
        ]
    )
    agent = Agent(name="raw", agent_endpoint=endpoint, tools=[greet("Hello"), agreet("Hi"), stop])
    _, messages = agent.invoke()
    results = [m.content for m in messages if m.message_kind == "tool_result"]
    assert results[:2] == ["Hello, Ada!", "Hi, Bob?"]
    with pytest.raises(ToolDefinitionError, match="annotate it -> str"):

        @factory(raw=True)  # type: ignore[arg-type]
        def typed(input: Str, messages: list[Message], ctx: str) -> Str:
            """Raw but typed."""
            return input
