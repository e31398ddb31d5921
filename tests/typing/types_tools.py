"""What the tool and factory decorators and Skill.factory promise to a type checker.

``Tool[In, Out]`` and ``Factory[C, In, Out]`` carry the decorated function's types, async
bodies included. ``chained_to=parent`` is checked too: the decorated function must accept the
parent's output (a subclass of its input fits). A chained tool is typed by what its chain
feeds it, ``Tool[ParentOut, Out]``, which is its own input when the two are the same type.
Parents named by string cannot be checked here; the agent checks them when it is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import assert_type

from roboz import Skill, factory, tool
from roboz.llm import LLMEndpoint, MockLLMEndpoint
from roboz.models import Empty, Int, Message, Stop, Str
from roboz.tools import Factory, SkillFactory, Tool


@tool
def double(input: Int, messages: list[Message]) -> Int:
    """Double it."""
    return Int(value=input.value * 2)


@tool(chained_to=double, chain_condition=lambda output: output.value > 10)
def report(input: Int, messages: list[Message]) -> Stop:
    """Report it."""
    return Stop(value=str(input.value))


@tool
async def fetch(input: Str, messages: list[Message]) -> Str | Stop:
    """Fetch it."""
    return Str(value=input.value)


@tool(name="renamed_source")
def source(input: Empty, messages: list[Message]) -> Int:
    """A number."""
    return Int(value=1)


@tool(pure=True)
def square(input: Int, messages: list[Message]) -> Int:
    """Square it (pure: a durable run re-runs it instead of recording a step)."""
    return Int(value=input.value**2)


@factory
def summarize(input: Str, messages: list[Message], endpoint: LLMEndpoint) -> Str:
    """Summarize with the given endpoint."""
    return Str(value=input.value[:10])


@factory(chained_to=summarize)
async def shout(input: Str, messages: list[Message], volume: int) -> Stop:
    """Shout the summary."""
    return Stop(value=input.value.upper() * volume)


assert_type(double, Tool[Int, Int])
assert_type(report, Tool[Int, Stop])
assert_type(fetch, Tool[Str, Str | Stop])
assert_type(source, Tool[Empty, Int])
assert_type(square, Tool[Int, Int])
assert_type(square.pure, bool)
assert_type(double.run(Int(value=1), []), Int)
assert_type(double.renamed("double_again").chain(chained_to=double), Tool[Int, Int])
assert_type(summarize, Factory[LLMEndpoint, Str, Str])
assert_type(summarize(MockLLMEndpoint([])), Tool[Str, Str])
assert_type(shout, Factory[int, Str, Stop])
assert_type(shout(3), Tool[Str, Stop])


async def run_async() -> None:
    assert_type(await fetch.arun(Str(value="x"), []), Str | Stop)


# Any tool fits where any tool is asked for.
everything: list[Tool] = [double, report, fetch, summarize(MockLLMEndpoint([]))]

tool(42)  # type: ignore[call-overload]
double.run(Int(value=1))  # type: ignore[call-arg]
double.run(Str(value="not an Int"), [])  # type: ignore[arg-type]


# chained_to: the child must accept the parent's output.
@tool(chained_to=double)  # type: ignore[arg-type]
def wants_text(input: Str, messages: list[Message]) -> Stop:
    """Str cannot take double's Int."""
    return Stop(value=input.value)


# A child whose input is a base class of the parent's output fits (Int is an Empty).
@tool(chained_to=double)
def takes_anything(input: Empty, messages: list[Message]) -> Stop:
    """Anything."""
    return Stop(value="ok")


assert_type(takes_anything, Tool[Int, Stop])
# Tool.chain checks the same way.
takes_anything.renamed("again").chain(chained_to=double)
report.renamed("from_text").chain(chained_to=summarize)  # type: ignore[arg-type]


def plain(input: Str, messages: list[Message]) -> Stop:
    """Chained by name."""
    return Stop(value=input.value)


# Names are not checked by the type checker (the agent checks them when it is built).
assert_type(tool(chained_to="double")(plain), Tool[Str, Stop])
assert_type(tool(plain), Tool[Str, Stop])


def build_tools(endpoint: LLMEndpoint) -> Sequence[Tool]:
    return [summarize(endpoint)]


skills = Skill.factory(
    name="summaries",
    description="Summaries.",
    instructions="Summarize.",
    build_tools=build_tools,
)
# The builder's context type is the factory's accepted context.
assert_type(skills, SkillFactory[LLMEndpoint])
assert_type(skills(MockLLMEndpoint([])), Skill)
skills("not an endpoint")  # type: ignore[arg-type]
