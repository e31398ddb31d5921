"""What the tool and factory decorators and Skill.factory promise to a type checker.

Tool is not generic yet, so a decorated tool's input and output types are checked when it is
decorated (at run time), not by the type checker: ``Tool.run`` takes and returns ``Empty``.
The same holds for chained_to: that a parent's output fits the child's input is checked when
the agent is built (tests/agent/test_chains.py), not here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, assert_type

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


@factory
def summarize(input: Str, messages: list[Message], endpoint: LLMEndpoint) -> Str:
    """Summarize with the given endpoint."""
    return Str(value=input.value[:10])


assert_type(double, Tool)
assert_type(report, Tool)
assert_type(double.run(Int(value=1), []), Empty)
assert_type(double.renamed("double_again").chain(chained_to=report), Tool)
# The factory decorator does not carry the context type over yet (Factory[Any]).
assert_type(summarize, Factory[Any])
assert_type(summarize(MockLLMEndpoint([])), Tool)

tool(42)  # type: ignore[call-overload]
double.run(Int(value=1))  # type: ignore[call-arg]


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
