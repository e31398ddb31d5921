"""FunctionEndpoint computes replies from the conversation; a tool's Retry is a repair."""

from __future__ import annotations

import json

import pytest

from roboz import Agent, AgentMode, tool
from roboz.agent import AgentReplyError, ToolExecutionError
from roboz.llm import Completion, FunctionEndpoint, ProviderRecord, TokenUsage
from roboz.models import Empty, Message, Stop, Str
from roboz.runtime.events import Event, LLMReplyRejected
from roboz.tools import Retry, stop


class When(Empty):
    date: str


@tool
def book(input: When, messages: list[Message]) -> Str:
    """Book a table on a date (YYYY-MM-DD)."""
    if len(input.date) != 10 or input.date[4] != "-":
        raise Retry(f"{input.date!r} is not a date in YYYY-MM-DD form")
    return Str(value=f"booked for {input.date}")


def answer(records: list[ProviderRecord]) -> dict[str, object]:
    """Answers from the last record, as a test double that reads the conversation."""
    last = records[-1]["content"]
    if "could not be used" in last:
        return {"action": "book", "date": "2026-12-24"}
    if "booked for" in last:
        return {"action": "stop", "value": json.loads(last.split("] ", 1)[1])["value"]}
    return {"action": "book", "date": "Christmas Eve"}


def test_a_function_endpoint_answers_from_the_messages_and_retry_corrects_the_llm() -> None:
    events: list[Event] = []
    endpoint = FunctionEndpoint(answer)
    agent = Agent(
        name="r", agent_endpoint=endpoint, tools=[book, stop], event_sinks=[events.append]
    )

    result, messages = agent.invoke()

    assert result.value == "booked for 2026-12-24"
    assert endpoint.calls == 3
    repair = [m for m in messages if m.message_kind == "repair"]
    assert len(repair) == 1 and repair[0].caller == "book"
    assert "'Christmas Eve' is not a date in YYYY-MM-DD form" in repair[0].content
    assert [e.reason for e in events if isinstance(e, LLMReplyRejected)] == [
        "'Christmas Eve' is not a date in YYYY-MM-DD form"
    ]
    # No tool result was recorded for the refused call, and nothing was rejected twice.
    assert [m.caller for m in messages if m.message_kind == "tool_result"] == ["book", "stop"]


def test_retries_count_with_the_other_repairs_and_are_bounded() -> None:
    replies = iter(
        [
            "not json",  # a repair of the reply
            {"action": "book", "date": "soon"},  # a Retry from the tool: the second repair
            {"action": "book", "date": "later"},  # the third: over the budget of two
            {"action": "stop"},
        ]
    )
    endpoint = FunctionEndpoint(lambda records: next(replies))
    agent = Agent(name="r", agent_endpoint=endpoint, tools=[book, stop], max_repairs=2)
    with pytest.raises(AgentReplyError, match="'later' is not a date") as caught:
        agent.invoke()
    assert endpoint.calls == 3
    kinds = [m.message_kind for m in caught.value.messages]
    assert kinds == ["rejected_reply", "repair", "action", "repair", "action"]


def test_a_decision_that_holds_restores_the_whole_budget() -> None:
    dates = iter(["soon", "2026-01-01", "later", "2026-01-02"])

    def reply(records: list[ProviderRecord]) -> dict[str, object]:
        if "booked for 2026-01-02" in records[-1]["content"]:
            return {"action": "stop", "value": "twice"}
        return {"action": "book", "date": next(dates)}

    agent = Agent(
        name="r", agent_endpoint=FunctionEndpoint(reply), tools=[book, stop], max_repairs=1
    )
    assert agent.invoke()[0].value == "twice"


def test_retry_in_a_deterministic_agent_ends_the_run_as_a_tool_error() -> None:
    @tool
    def start(input: Empty, messages: list[Message]) -> Stop:
        """Start."""
        raise Retry("no one to tell")

    agent = Agent(name="d", mode=AgentMode.DETERMINISTIC, default_tools=[start])
    with pytest.raises(ToolExecutionError, match="no LLM to correct"):
        agent.invoke()


def test_a_function_endpoint_may_return_a_whole_completion() -> None:
    endpoint = FunctionEndpoint(
        lambda records: Completion(
            text='{"action": "stop", "value": "x"}', usage=TokenUsage(input_tokens=9)
        )
    )
    _, messages = Agent(name="c", agent_endpoint=endpoint, tools=[stop]).invoke()
    assert messages[0].token_input == 9
