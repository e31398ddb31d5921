"""What ``@tool(raw=True)`` promises to a type checker: the function returns ``str``, the tool
is ``Tool[In, RawText]`` (a Str, so Str children chain to it), and a typed tool stays typed."""

from __future__ import annotations

from typing import assert_type

from roboz import factory, tool
from roboz.models import Empty, Int, Message, RawText, Stop, Str
from roboz.tools import Factory, Tool


@tool(raw=True)
def listing(input: Empty, messages: list[Message]) -> str:
    """List it, as text."""
    return "a\nb"


@tool(raw=True, name="fetched")
async def fetch_page(input: Str, messages: list[Message]) -> str:
    """Fetch a page, as text."""
    return input.value


@tool
def count(input: Int, messages: list[Message]) -> Int:
    """Count."""
    return input


@tool(raw=True, chained_to=count)
def spell(input: Int, messages: list[Message]) -> str:
    """Spell the number."""
    return str(input.value)


# A Str child chains to a raw tool: RawText is a Str.
@tool(chained_to=listing)
def first_line(input: Str, messages: list[Message]) -> Stop:
    """The first line."""
    return Stop(value=input.value.splitlines()[0])


assert_type(listing, Tool[Empty, RawText])
assert_type(fetch_page, Tool[Str, RawText])
assert_type(spell, Tool[Int, RawText])
assert_type(first_line, Tool[RawText, Stop])
assert_type(listing.run(Empty(), []), RawText)
assert_type(listing.run(Empty(), []).value, str)


# The opt-in is explicit: a typed tool cannot return str, and a raw one returns only str.
@tool  # type: ignore[arg-type]
def untyped(input: Empty, messages: list[Message]) -> str:
    """No opt-in."""
    return "text"


@tool(raw=True)  # type: ignore[arg-type]
def not_text(input: Empty, messages: list[Message]) -> Str:
    """Raw, but not text."""
    return Str(value="x")


# Factories opt in the same way; the tools they build return RawText.
@factory(raw=True)
def greeting(input: Str, messages: list[Message], ctx: str) -> str:
    """Greet, as text."""
    return f"{ctx} {input.value}"


@factory(raw=True, chained_to=count)
async def counted(input: Int, messages: list[Message], ctx: int) -> str:
    """Say the count, as text."""
    return str(input.value + ctx)


assert_type(greeting, Factory[str, Str, RawText])
assert_type(greeting("hello"), Tool[Str, RawText])
assert_type(counted, Factory[int, Int, RawText])


@factory  # type: ignore[arg-type]
def untyped_factory(input: Empty, messages: list[Message], ctx: int) -> str:
    """No opt-in."""
    return "text"
