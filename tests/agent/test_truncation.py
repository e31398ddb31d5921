"""Truncation changes what the LLM sees, never what is stored."""

import pytest

from roboz import Agent, tool
from roboz.llm import MockLLMEndpoint
from roboz.models import Empty, Image, Message, Severity, Str, StrImage, Truncation
from roboz.tools import stop
from tests.agent.helpers import contents

LONG = "traceback line\n" * 40
PICTURE = Image(url="https://example.com/chart.png")


def run_with(
    truncation: Truncation, calls_after: int
) -> tuple[list[list[str]], list[Message], MockLLMEndpoint]:
    @tool
    def noisy(input: Empty, messages: list[Message]) -> StrImage:
        """Produce a long output."""
        return StrImage(value=LONG, images=[PICTURE], truncation=truncation)

    @tool
    def wait(input: Empty, messages: list[Message]) -> Empty:
        """Do nothing."""
        return Empty()

    replies = [{"action": "noisy"}] + [{"action": "wait"}] * calls_after + [{"action": "stop"}]
    endpoint = MockLLMEndpoint(replies)
    agent = Agent(name="t", agent_endpoint=endpoint, tools=[noisy, wait, stop])
    _, messages = agent.invoke()
    return [contents(request) for request in endpoint.requests], messages, endpoint


def noisy_record(request: list[str]) -> str | None:
    found = [text for text in request if text.startswith("[noisy result]")]
    return found[0] if found else None


def test_remove_after_one_showing_hides_the_message_from_the_second_call_on() -> None:
    seen, messages, _ = run_with(Truncation(threshold=1, severity=Severity.REMOVE), 2)
    assert noisy_record(seen[0]) is None  # the message does not exist yet on the first call
    assert (noisy_record(seen[1]) or "").count("traceback line") == 40
    assert noisy_record(seen[2]) is None
    assert noisy_record(seen[3]) is None
    stored = [m for m in messages if m.caller == "noisy"][0]
    assert stored.content.count("traceback line") == 40 and stored.images == [
        PICTURE
    ]  # storage intact
    assert stored.times_shown == 1


def test_stub_replaces_content_and_drops_images() -> None:
    _, _, endpoint = run_with(Truncation(threshold=1, severity=Severity.STUB), 1)
    shown_full = [r for r in endpoint.requests[1] if r["content"].startswith("[noisy result]")][0]
    assert shown_full["images"] == [PICTURE]
    stub = [r for r in endpoint.requests[2] if "noisy" in r["content"] and "hidden" in r["content"]]
    assert stub and stub[0]["images"] == []


def test_light_keeps_a_prefix_and_the_images() -> None:
    _, _, endpoint = run_with(Truncation(threshold=0, severity=Severity.LIGHT, max_chars=20), 1)
    light = [r for r in endpoint.requests[1] if r["content"].startswith("[noisy result]")][0]
    assert light["content"].endswith("… [truncated]")
    assert len(light["content"]) < 80
    assert light["images"] == [PICTURE]


@pytest.mark.parametrize("threshold", [2, 3])
def test_threshold_counts_showings(threshold: int) -> None:
    seen, _, _ = run_with(Truncation(threshold=threshold, severity=Severity.REMOVE), 4)
    shown = [noisy_record(request) is not None for request in seen]
    assert shown == [False] + [True] * threshold + [False] * (5 - threshold)


def test_results_carry_images_as_attachments_not_in_the_json_text() -> None:
    _, messages, _ = run_with(Truncation(threshold=5), 0)
    stored = [m for m in messages if m.caller == "noisy"][0]
    assert "example.com" not in stored.content
    assert stored.images == [PICTURE]


def test_rewriting_the_conversation_in_place_is_picked_up() -> None:
    @tool
    def compact(input: Empty, messages: list[Message]) -> Str:
        """Forget everything said so far."""
        messages.clear()
        return Str(value="compacted")

    endpoint = MockLLMEndpoint([{"action": "stop", "value": "x"}])
    agent = Agent(
        name="t", agent_endpoint=endpoint, tools=[compact, stop], initial_messages=["remember me"]
    )
    endpoint.responses = [{"action": "compact"}, {"action": "stop"}]
    agent.invoke()
    assert "remember me" in contents(endpoint.requests[0])
    assert contents(endpoint.requests[1]) == ['[compact result] {"value":"compacted"}']
