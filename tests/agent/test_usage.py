"""Token usage and cost of a run: per call, per (endpoint, model) and in total.

Like every agent test this runs through ``invoke`` and through ``ainvoke`` (conftest).
"""

from __future__ import annotations

import pytest

import roboz.tools
from roboz import Agent, tool
from roboz.agent import AgentReplyError
from roboz.agent.nested import agent_tool
from roboz.llm import Completion, FunctionEndpoint, MockLLMEndpoint, TokenUsage, get_completion
from roboz.models import Empty, Message, Str
from roboz.runtime.events import AgentFailed, AgentFinished, Event
from roboz.runtime.usage import LLMCallUsage, ModelPrice, RunUsage

PRICE = ModelPrice(input_per_mtok=2.0, output_per_mtok=10.0)


def fixed(text: str, tokens_in: int, tokens_out: int, model: str = "m-1") -> Completion:
    return Completion(text=text, usage=TokenUsage(tokens_in, tokens_out), model=model)


def scripted(*replies: Completion, price: ModelPrice | None = PRICE) -> FunctionEndpoint:
    queue = list(replies)
    return FunctionEndpoint(lambda records: queue.pop(0), name="main", price=price)


def test_every_call_is_counted_with_its_cost_repairs_included() -> None:
    events: list[Event] = []
    endpoint = scripted(
        fixed("not json", 100, 5),
        fixed('{"action": "stop", "value": "done"}', 150, 20, model="m-1-2026"),
    )
    agent = Agent(
        name="a", agent_endpoint=endpoint, tools=[roboz.tools.stop], event_sinks=[events.append]
    )
    stop, _ = agent.invoke()
    assert stop.value == "done"
    usage = agent.last_usage
    assert usage.calls == (
        LLMCallUsage("main", "m-1", 100, 5, cost=PRICE.cost(100, 5), rejected=True),
        LLMCallUsage("main", "m-1-2026", 150, 20, cost=PRICE.cost(150, 20)),
    )
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (250, 25, 275)
    assert usage.cost == pytest.approx((250 * 2.0 + 25 * 10.0) / 1e6)
    assert usage.unpriced_calls == 0
    finished = [e for e in events if isinstance(e, AgentFinished)]
    assert len(finished) == 1 and finished[0].usage == usage
    assert finished[0].llm_calls == usage.llm_calls == 2


def test_a_failed_run_reports_what_it_spent() -> None:
    events: list[Event] = []
    endpoint = scripted(*(fixed("nope", 10, 1) for _ in range(3)))
    agent = Agent(
        name="a",
        agent_endpoint=endpoint,
        tools=[roboz.tools.stop],
        max_repairs=2,
        event_sinks=[events.append],
    )
    with pytest.raises(AgentReplyError):
        agent.invoke()
    assert agent.last_usage.llm_calls == 3
    assert all(call.rejected for call in agent.last_usage.calls)
    failed = [e for e in events if isinstance(e, AgentFailed)]
    assert failed[0].usage == agent.last_usage


def test_calls_a_tool_makes_count_per_endpoint_and_model_and_without_a_price() -> None:
    helper = FunctionEndpoint(
        lambda records: fixed("a summary", 40, 8, model="small"), name="helper"
    )

    @tool
    def summarize(input: Str, messages: list[Message]) -> Str:
        """Summarize a text with a second model."""
        return Str(value=get_completion(helper, [Message(role="user", content=input.value)]))

    endpoint = scripted(
        fixed('{"action": "summarize", "value": "long text"}', 100, 10),
        fixed('{"action": "stop", "value": "ok"}', 120, 10),
    )
    agent = Agent(name="a", agent_endpoint=endpoint, tools=[summarize, roboz.tools.stop])
    agent.invoke()
    usage = agent.last_usage
    assert [(c.endpoint, c.model) for c in usage.calls] == [
        ("main", "m-1"),
        ("helper", "small"),
        ("main", "m-1"),
    ]
    by_model = {(m.endpoint, m.model): m for m in usage.by_model()}
    assert list(by_model) == [("main", "m-1"), ("helper", "small")]
    main, small = by_model[("main", "m-1")], by_model[("helper", "small")]
    assert (main.calls, main.input_tokens, main.output_tokens) == (2, 220, 20)
    assert (small.calls, small.input_tokens, small.output_tokens, small.cost) == (1, 40, 8, None)
    # The cost is that of the priced calls, and says how many had no price.
    assert usage.cost == pytest.approx(PRICE.cost(220, 20))
    assert usage.unpriced_calls == 1
    assert "(+1 call(s) without a price)" in usage.summary()


def test_a_nested_agent_counts_its_own_calls_and_its_parent_does_not() -> None:
    child = Agent(
        name="researcher",
        agent_endpoint=scripted(fixed('{"action": "stop", "value": "42"}', 70, 7, model="kid")),
        tools=[roboz.tools.stop],
    )
    parent = Agent(
        name="lead",
        agent_endpoint=scripted(
            fixed('{"action": "researcher", "value": "what?"}', 100, 10),
            fixed('{"action": "stop", "value": "done"}', 110, 10),
        ),
        tools=[agent_tool(child), roboz.tools.stop],
    )
    parent.invoke()
    assert [c.model for c in parent.last_usage.calls] == ["m-1", "m-1"]
    assert [c.model for c in child.last_usage.calls] == ["kid"]
    assert parent.last_usage.input_tokens == 210
    assert child.last_usage.input_tokens == 70


def test_a_deterministic_run_and_an_unpriced_endpoint_report_no_cost() -> None:
    @tool
    def finish(input: Empty, messages: list[Message]) -> roboz.models.Stop:
        """End at once."""
        return roboz.models.Stop(value="x")

    agent = Agent(name="d", mode="deterministic", default_tools=[finish])  # type: ignore[arg-type]
    agent.invoke()
    assert agent.last_usage == RunUsage()
    assert agent.last_usage.cost is None

    mock = MockLLMEndpoint([{"action": "stop", "value": "y"}])
    agent = Agent(name="m", agent_endpoint=mock, tools=[roboz.tools.stop])
    agent.invoke()
    (call,) = agent.last_usage.calls
    assert call.endpoint == "mock" and call.cost is None and call.input_tokens > 0
    assert agent.last_usage.cost is None
