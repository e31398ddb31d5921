"""What the LLM is shown, and how unusable replies are repaired or end the run."""

import json

import pytest

from roboz import Agent, tool
from roboz.agent import (
    AgentCancelledError,
    AgentReplyError,
    MaxStepsExceededError,
    ToolExecutionError,
    current_run,
)
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Int, Message, Role, Stop, Str
from roboz.tools import stop
from tests.agent.helpers import contents, system_text


class Numbers(Empty):
    left: int
    right: int = 0


@tool
def add(input: Numbers, messages: list[Message]) -> Int:
    """Add two numbers."""
    return Int(value=input.left + input.right)


@tool(chained_to=add, chain_condition=lambda x: x.value > 100)
def too_big(input: Int, messages: list[Message]) -> Stop:
    """Stop on big sums."""
    return Stop(value="big")


def make(replies: list, **kwargs) -> tuple[Agent, MockLLMEndpoint]:  # type: ignore[type-arg]
    endpoint = MockLLMEndpoint(replies)
    return Agent(
        name="calc",
        system_prompt="Add.",
        agent_endpoint=endpoint,
        tools=[add, too_big, stop],
        **kwargs,
    ), endpoint


def test_the_system_prompt_lists_active_tools_with_their_arguments_only() -> None:
    agent, endpoint = make([{"action": "stop", "value": "x"}])
    agent.invoke()
    prompt = system_text(endpoint.requests[0])
    assert prompt.startswith("Add.")
    assert "### add\nAdd two numbers." in prompt
    assert '"left"' in prompt and "truncation" not in prompt
    assert "too_big" not in prompt  # chained tools are passive: never shown
    assert "### ask_user" in prompt  # steerable agents may ask the user


def test_the_technical_prompt_can_be_switched_off() -> None:
    agent, endpoint = make([{"action": "stop", "value": "x"}], automatic_tool_prompt=False)
    agent.invoke()
    assert system_text(endpoint.requests[0]) == "Add."


def test_arguments_are_validated_and_results_flow_back() -> None:
    agent, endpoint = make(
        [
            {"action": "add", "rationale": "sum", "left": 2, "right": 3},
            {"action": "stop", "rationale": "done", "value": "5"},
        ]
    )
    result, messages = agent.invoke()
    assert result.value == "5"
    assert any('{"value":5}' in text for text in contents(endpoint.requests[1]))
    action = json.loads(messages[0].content)
    assert action == {"action": "add", "rationale": "sum", "left": 2, "right": 3}
    assert messages[0].role is Role.ASSISTANT and messages[0].token_input


def test_unset_defaults_are_omitted_from_the_recorded_action() -> None:
    agent, _ = make([{"action": "add", "left": 1}, {"action": "stop"}])
    _, messages = agent.invoke()
    assert json.loads(messages[0].content) == {"action": "add", "rationale": "", "left": 1}


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("this is not json", "not a JSON object"),
        ("[1, 2]", "one JSON object"),
        ('{"rationale": "forgot"}', '"action" field'),
        ('{"action": "multiply"}', "unknown action 'multiply'; choose one of: add, ask_user, stop"),
        ('{"action": "too_big"}', "'too_big' runs automatically after 'add'"),
        ('{"action": "add", "right": 1}', "left: Field required"),
        ('{"action": "add", "left": 1, "sneaky": 2}', "sneaky: Extra inputs"),
    ],
)
def test_bad_replies_go_back_to_the_llm_with_the_reason(bad: str, reason: str) -> None:
    agent, endpoint = make([bad, {"action": "stop", "value": "ok"}])
    result, messages = agent.invoke()
    assert result.value == "ok"
    assert endpoint.calls == 2
    correction = endpoint.requests[1][-1]
    assert correction["role"] == "user"
    assert reason in correction["content"]
    assert [m.message_kind for m in messages[:2]] == ["rejected_reply", "repair"]


def test_replies_in_a_code_fence_are_accepted() -> None:
    agent, endpoint = make(['```json\n{"action": "stop", "value": "fenced"}\n```'])
    assert agent.invoke()[0].value == "fenced"


def test_repairs_are_bounded_then_a_typed_error_keeps_the_conversation() -> None:
    agent, endpoint = make(["nope", "still nope", "never"], max_repairs=2)
    with pytest.raises(AgentReplyError, match="after 2 correction"):
        agent.invoke()
    assert endpoint.calls == 3


def test_a_tool_that_raises_ends_the_run_naming_it_and_nothing_is_lost() -> None:
    @tool
    def explode(input: Empty, messages: list[Message]) -> Str:
        """Always fails."""
        raise RuntimeError("kaboom")

    endpoint = MockLLMEndpoint([{"action": "add", "left": 1}, {"action": "explode"}])
    agent = Agent(name="x", agent_endpoint=endpoint, tools=[add, explode])
    with pytest.raises(
        ToolExecutionError, match="'explode' failed: RuntimeError: kaboom"
    ) as caught:
        agent.invoke()
    assert caught.value.tool == "explode"
    assert [m.caller for m in caught.value.messages] == ["prompt_llm", "add", "prompt_llm"]
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_an_exhausted_mock_script_is_a_clear_error() -> None:
    agent, _ = make([])
    with pytest.raises(ToolExecutionError, match="prompt_llm.*no reply left"):
        agent.invoke()


def test_max_steps_ends_a_run_that_never_stops() -> None:
    agent, _ = make([{"action": "add", "left": 1}] * 50, max_steps=6)
    with pytest.raises(MaxStepsExceededError, match="more than 6 steps") as caught:
        agent.invoke()
    assert len(caught.value.messages) == 6


def test_continuing_a_conversation_keeps_earlier_messages() -> None:
    agent, endpoint = make([{"action": "stop", "value": "a"}, {"action": "stop", "value": "b"}])
    _, first = agent.invoke()
    result, second = agent.invoke(first)
    assert result.value == "b"
    assert second is first and len(second) == 4
    assert '"value": "a"' in "".join(contents(endpoint.requests[1]))


def test_cancel_stops_the_run_before_its_next_step() -> None:
    holder: list[Agent] = []

    @tool
    def cancel_me(input: Empty, messages: list[Message]) -> Str:
        """Ask for the run to stop (as another thread would)."""
        holder[0].cancel()
        return Str(value="cancelling")

    endpoint = MockLLMEndpoint([{"action": "cancel_me"}, {"action": "stop"}])
    agent = Agent(name="c", agent_endpoint=endpoint, tools=[cancel_me, stop])
    holder.append(agent)
    with pytest.raises(AgentCancelledError, match="cancelled after 2 step") as caught:
        agent.invoke()
    assert endpoint.calls == 1
    assert [m.caller for m in caught.value.messages] == ["prompt_llm", "cancel_me"]
    # A new run starts uncancelled: it uses the next scripted reply, stop.
    assert isinstance(agent.invoke()[0], Stop)
    assert endpoint.calls == 2


def test_the_cancel_event_reaches_the_endpoint() -> None:
    seen: list[object] = []

    class Watching(MockLLMEndpoint):
        def complete(self, records, *, on_delta=None, cancel=None):  # type: ignore[no-untyped-def]
            context = current_run()
            seen.append((cancel, context.cancel if context is not None else None))
            return super().complete(records, on_delta=on_delta, cancel=cancel)

    agent = Agent(name="c", agent_endpoint=Watching([{"action": "stop"}]), tools=[stop])
    agent.invoke()
    (cancel, of_the_run), *_ = seen
    assert cancel is not None and cancel is of_the_run
