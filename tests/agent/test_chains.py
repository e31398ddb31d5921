"""Chains run deterministically after their parent; defaults resume when a chain ends."""

import pytest

from roboz import Agent, AgentMode, tool
from roboz.agent import AgentConfigurationError, ChainConflictError
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Int, Message, Role, Stop, Str
from roboz.tools import stop


@tool
def ask(input: Empty, messages: list[Message]) -> Int:
    """Ask for a number."""
    return Int(value=4)


@tool(chained_to=ask, chain_condition=lambda x: x.value % 2 == 0)
def even(input: Int, messages: list[Message]) -> Str:
    """Handle even numbers."""
    return Str(value=f"{input.value} is even")


@tool(chained_to=ask, chain_condition=lambda x: x.value % 2 == 1)
def odd(input: Int, messages: list[Message]) -> Str:
    """Handle odd numbers."""
    return Str(value=f"{input.value} is odd")


@tool(chained_to=even)
def finish(input: Str, messages: list[Message]) -> Stop:
    """Finish with the text."""
    return Stop(value=input.value)


def test_an_invoked_tool_runs_its_true_chain_without_asking_the_llm() -> None:
    endpoint = MockLLMEndpoint([{"action": "ask", "rationale": "go"}])
    agent = Agent(name="t", agent_endpoint=endpoint, tools=[ask, even, odd, finish])
    result, messages = agent.invoke()
    assert result.value == "4 is even"
    assert endpoint.calls == 1
    assert [m.caller for m in messages] == ["prompt_llm", "ask", "even", "finish"]


def test_the_false_branch_never_runs_and_the_chain_end_returns_to_defaults() -> None:
    @tool
    def ask_odd(input: Empty, messages: list[Message]) -> Int:
        """Ask for an odd number."""
        return Int(value=3)

    odd_only = odd.renamed("odd").chain(
        chained_to=ask_odd, chain_condition=lambda x: x.value % 2 == 1
    )
    never = even.renamed("even").chain(
        chained_to=ask_odd, chain_condition=lambda x: x.value % 2 == 0
    )
    endpoint = MockLLMEndpoint(
        [{"action": "ask_odd", "rationale": "go"}, {"action": "stop", "value": "done"}]
    )
    agent = Agent(name="t", agent_endpoint=endpoint, tools=[ask_odd, odd_only, never, stop])
    result, messages = agent.invoke()
    assert result.value == "done"
    callers = [m.caller for m in messages]
    assert callers == ["prompt_llm", "ask_odd", "odd", "prompt_llm", "stop"]
    assert endpoint.calls == 2
    # The odd branch's result was shown to the LLM on the second call.
    assert any("3 is odd" in r["content"] for r in endpoint.requests[1])


def test_two_true_conditions_are_an_error_naming_both_tools() -> None:
    @tool(chained_to=ask)
    def first(input: Int, messages: list[Message]) -> Str:
        """One."""
        return Str(value="1")

    @tool(chained_to=ask, chain_condition=lambda x: x.value > 0)
    def second(input: Int, messages: list[Message]) -> Str:
        """Two."""
        return Str(value="2")

    agent = Agent(
        name="t",
        agent_endpoint=MockLLMEndpoint([{"action": "ask"}]),
        tools=[ask, first, second],
    )
    with pytest.raises(ChainConflictError, match="'first'.*'second'") as caught:
        agent.invoke()
    assert [m.caller for m in caught.value.messages] == ["prompt_llm", "ask"]


def test_a_chain_whose_parent_output_does_not_fit_fails_when_built() -> None:
    @tool(chained_to=even)
    def wants_int(input: Int, messages: list[Message]) -> Stop:
        """Needs an Int."""
        return Stop()

    with pytest.raises(AgentConfigurationError, match="'even' -> 'wants_int'.*Str.*Int"):
        Agent(name="t", agent_endpoint=MockLLMEndpoint([]), tools=[ask, even, wants_int])


def test_a_chain_to_a_missing_parent_fails_when_built() -> None:
    with pytest.raises(AgentConfigurationError, match="'even' is chained to 'ask'"):
        Agent(name="t", agent_endpoint=MockLLMEndpoint([]), tools=[even])


def test_a_parent_that_only_stops_cannot_feed_a_chain() -> None:
    @tool(chained_to=finish)
    def after_stop(input: Empty, messages: list[Message]) -> Stop:
        """Never reachable."""
        return Stop()

    with pytest.raises(AgentConfigurationError, match="only returns Stop"):
        Agent(name="t", agent_endpoint=MockLLMEndpoint([]), tools=[ask, even, finish, after_stop])


def test_defaults_cannot_declare_chained_to() -> None:
    with pytest.raises(AgentConfigurationError, match="default tool 'even'"):
        Agent(name="t", mode=AgentMode.DETERMINISTIC, default_tools=[ask, even])


def test_defaults_may_be_parents_without_being_listed_as_tools() -> None:
    agent = Agent(name="t", mode=AgentMode.DETERMINISTIC, default_tools=[ask], tools=[even, finish])
    result, _ = agent.invoke()
    assert result.value == "4 is even"


def test_deterministic_defaults_run_in_order_and_repeat_until_stop() -> None:
    calls: list[str] = []

    @tool
    def hook(input: Empty, messages: list[Message]) -> Empty:
        """Start-up hook that only acts once."""
        calls.append("hook")
        return Empty()

    @tool
    def count(input: Empty, messages: list[Message]) -> Int:
        """Count the runs so far."""
        calls.append("count")
        return Int(value=sum(1 for m in messages if m.caller == "count"))

    @tool(chained_to=count, chain_condition=lambda x: x.value >= 2)
    def enough(input: Int, messages: list[Message]) -> Stop:
        """Stop after three counts."""
        return Stop(value=input.value)

    agent = Agent(
        name="d", mode=AgentMode.DETERMINISTIC, default_tools=[hook, count], tools=[enough]
    )
    result, messages = agent.invoke()
    assert result.value == 2
    assert calls == ["hook", "count"] * 3
    assert all(m.role is Role.TOOL for m in messages)


def test_a_deterministic_agent_needs_a_default_and_an_llm_agent_an_endpoint() -> None:
    with pytest.raises(AgentConfigurationError, match="at least one default"):
        Agent(name="d", mode=AgentMode.DETERMINISTIC, tools=[ask])
    with pytest.raises(AgentConfigurationError, match="needs agent_endpoint"):
        Agent(name="s", tools=[ask])


def test_defaults_with_required_input_fields_are_rejected() -> None:
    @tool
    def needs_text(input: Str, messages: list[Message]) -> Stop:
        """Needs text."""
        return Stop()

    with pytest.raises(AgentConfigurationError, match="'needs_text'.*required fields"):
        Agent(name="d", mode=AgentMode.DETERMINISTIC, default_tools=[needs_text])


def test_duplicate_tool_names_are_rejected() -> None:
    with pytest.raises(AgentConfigurationError, match="named 'ask'"):
        Agent(
            name="t",
            agent_endpoint=MockLLMEndpoint([]),
            tools=[ask, ask.renamed("ask").chain(chained_to=even)],
        )


def test_chains_given_as_sequences_are_flattened_in_order() -> None:
    endpoint = MockLLMEndpoint([{"action": "ask"}])
    agent = Agent(name="t", agent_endpoint=endpoint, tools=[(ask, even, finish), odd])
    assert [t.name for t in agent.tools] == ["ask", "even", "finish", "odd"]
    assert agent.invoke()[0].value == "4 is even"
