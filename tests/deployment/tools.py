"""Small tools and skills the deployment tests assemble into agents."""

from __future__ import annotations

from roboz import Skill, tool
from roboz.models import Empty, Message, Stop, Str


@tool
def greet(input: Empty, messages: list[Message]) -> Str:
    """Say hello."""
    return Str(value="hello")


@tool(chained_to=greet)
def shout(input: Str, messages: list[Message]) -> Stop:
    """Shout what the parent said and stop."""
    return Stop(value=input.value.upper())


@tool
def count(input: Empty, messages: list[Message]) -> Str:
    """Count the tool messages so far."""
    return Str(value=str(len(messages)))


@tool
def finish(input: Empty, messages: list[Message]) -> Stop:
    """Stop with the last tool output seen."""
    return Stop(value=messages[-1].content if messages else "")


@tool
def lookup(input: Str, messages: list[Message]) -> Str:
    """Look something up."""
    return Str(value=f"found {input.value}")


guide = Skill(name="guide", description="Project guidance", instructions="Be helpful.")
manual = Skill(
    name="manual", description="How to look things up", instructions="Use lookup.", tools=[lookup]
)
