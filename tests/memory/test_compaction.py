"""Compaction: a default tool before prompt_llm; a view, never a change to what is stored."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import roboz.tools
from roboz import Agent, tool
from roboz.llm import MockLLMEndpoint
from roboz.llm.endpoint import Completion, DeltaCallback
from roboz.llm.records import ProviderRecord
from roboz.models import Image, Message, Str, StrImage
from roboz.runtime.events import Event
from roboz.shed.tools.compaction import (
    CompactionSkipped,
    ContextCompacted,
    compaction_tool,
)
from roboz.threads import SQLiteThreadStore

PNG = Image.from_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16)
URL = Image(url="https://example.org/cat.png")


@tool
def dig(input: Str, messages: list[Message]) -> StrImage:
    """Dig up a long finding."""
    return StrImage(value=f"finding {input.value}: " + "lorem ipsum " * 170, images=[PNG, URL])


def replies(n: int) -> list[object]:
    return [
        *({"action": "dig", "value": str(i)} for i in range(n)),
        {"action": "stop", "value": "ok"},
    ]


def text_of(records: Sequence[ProviderRecord]) -> str:
    return "\n".join(str(r["content"]) for r in records)


def run(summarizer: MockLLMEndpoint, n: int = 4, **settings: object) -> tuple[Agent, list[Event]]:
    events: list[Event] = []
    agent = Agent(
        name="digger",
        agent_endpoint=MockLLMEndpoint(replies(n), max_context_tokens=2500),
        tools=[dig, roboz.tools.stop],
        default_tools=[compaction_tool(endpoint=summarizer, **settings)],
        initial_messages=["find things about the cat"],
        event_sinks=[events.append],
    )
    return agent, events


def test_compaction_summarizes_older_messages_and_keeps_every_original() -> None:
    summarizer = MockLLMEndpoint(["SUMMARY: dug 0-2, all lorem"])
    agent, events = run(summarizer)
    _, conversation = agent.invoke()
    compacted = [e for e in events if isinstance(e, ContextCompacted)]
    assert len(compacted) == 1 and compacted[0].estimated_tokens >= 0.8 * 2500
    # Stored: every original message, plus the compacted one.
    assert sum(1 for m in conversation if m.caller == "dig") == 4
    kinds = [m.message_kind for m in conversation]
    assert kinds.count("compacted_context") == 1
    # The LLM's next request has the head (the task) and the summary, not the old findings.
    endpoint = agent.agent_endpoint
    assert isinstance(endpoint, MockLLMEndpoint)
    after = text_of(endpoint.requests[-1])
    assert "find things about the cat" in after and "SUMMARY: dug 0-2" in after
    assert "finding 0" not in after
    # The summarizer saw text only: markers for images, no image parts, and its own prompts
    # never entered the agent's conversation.
    (request,) = summarizer.requests
    sent = text_of(request)
    assert "[image 1]" in sent and "[image: https://example.org/cat.png]" in sent
    assert all(isinstance(r["content"], str) for r in request)
    assert not any("compact the working memory" in m.content for m in conversation)


def test_over_budget_summary_is_asked_again_with_feedback() -> None:
    summarizer = MockLLMEndpoint(["long " * 400, "long " * 300, "short summary"])
    agent, events = run(summarizer, summary_max_tokens=50)
    _, conversation = agent.invoke()
    (done,) = [e for e in events if isinstance(e, ContextCompacted)]
    assert done.attempts == 3
    assert "must fit in 50 tokens" in text_of(summarizer.requests[1])
    assert any(m.content.endswith("short summary") for m in conversation)


def test_summary_that_never_fits_leaves_the_run_uncompacted() -> None:
    summarizer = MockLLMEndpoint(["long " * 400] * 10)
    agent, events = run(summarizer, summary_max_tokens=50, max_attempts=2)
    stop, conversation = agent.invoke()
    skipped = [e for e in events if isinstance(e, CompactionSkipped)]
    assert skipped and "still over 50 tokens after 2 attempt(s)" in skipped[0].reason
    assert stop.value == "ok"
    assert not any(m.message_kind == "compacted_context" for m in conversation)


def test_failing_summarizer_is_an_event_and_the_run_goes_on() -> None:
    summarizer = MockLLMEndpoint([RuntimeError("quota exceeded")] * 10)
    agent, events = run(summarizer)
    stop, _ = agent.invoke()
    skipped = [e for e in events if isinstance(e, CompactionSkipped)]
    assert stop.value == "ok" and "quota exceeded" in skipped[0].reason


class SlowEndpoint(MockLLMEndpoint):
    def complete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: DeltaCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not (cancel and cancel.is_set()):
            time.sleep(0.01)
        return super().complete(records, on_delta=on_delta, cancel=cancel)


def test_summarizer_timeout_is_an_event_and_the_run_goes_on() -> None:
    agent, events = run(SlowEndpoint(["late"] * 10), timeout_s=0.1)
    started = time.monotonic()
    stop, _ = agent.invoke()
    assert stop.value == "ok" and time.monotonic() - started < 3
    skipped = [e for e in events if isinstance(e, CompactionSkipped)]
    assert skipped and "did not answer within 0.1 s" in skipped[0].reason


def test_no_compaction_below_the_threshold() -> None:
    summarizer = MockLLMEndpoint([])
    agent, events = run(summarizer, n=1)
    agent.invoke()
    assert summarizer.calls == 0 and not [e for e in events if isinstance(e, ContextCompacted)]


def test_a_resumed_run_sees_the_same_compacted_view(tmp_path: Path) -> None:
    summarizer = MockLLMEndpoint(["SUMMARY of the dig"])
    with SQLiteThreadStore(tmp_path / "runs.db") as store:
        agent, _ = run(summarizer)
        agent = agent.replace(store=store)
        _, conversation = agent.invoke(thread_id="dig-1")
        assert len(store.get_thread("dig-1").messages) == len(conversation)
        resumed_endpoint = MockLLMEndpoint([{"action": "stop", "value": "again"}])
        resumed = Agent(
            name="digger",
            agent_endpoint=resumed_endpoint,
            tools=[dig, roboz.tools.stop],
            default_tools=[compaction_tool(endpoint=MockLLMEndpoint([]))],
            store=store,
        )
        resumed.invoke(thread_id="dig-1")
        seen = text_of(resumed_endpoint.requests[0])
        assert "SUMMARY of the dig" in seen and "finding 0" not in seen
        assert "find things about the cat" in seen


def test_the_agents_endpoint_summarizes_by_default() -> None:
    endpoint = MockLLMEndpoint(
        [
            {"action": "dig", "value": "0"},
            {"action": "dig", "value": "1"},
            {"action": "dig", "value": "2"},
            "SUMMARY by the agent's own endpoint",
            {"action": "stop", "value": "ok"},
        ],
        max_context_tokens=2500,
    )
    agent = Agent(
        name="digger",
        agent_endpoint=endpoint,
        tools=[dig, roboz.tools.stop],
        default_tools=[compaction_tool()],
        initial_messages=["find things"],
    )
    _, conversation = agent.invoke()
    assert any("SUMMARY by the agent" in m.content for m in conversation)


def test_compaction_capability_runs_before_prompt_llm() -> None:
    from roboz.deployment import DeployableAgent
    from roboz.shed.capabilities.compaction import Compaction

    endpoint = MockLLMEndpoint([{"action": "stop", "value": "ok"}])
    definition = DeployableAgent(
        "with-compaction",
        agent_endpoint=endpoint,
        capabilities=[Compaction(threshold=0.5)],
    )
    runtime, _ = definition.build()
    assert [t.name for t in runtime.default_tools] == ["compact_context"]
    info = runtime.show_agent_info(print_it=False)
    assert "compact_context, prompt_llm" in info


def test_compaction_applies_with_a_custom_scrubber_too() -> None:
    from roboz.llm import default_messages_scrubber

    summarizer = MockLLMEndpoint(["SUMMARY via the whole-list path"])
    endpoint = MockLLMEndpoint(
        replies(4),
        max_context_tokens=2500,
        messages_scrubber=lambda messages: default_messages_scrubber(list(messages)),
    )
    agent = Agent(
        name="digger",
        agent_endpoint=endpoint,
        tools=[dig, roboz.tools.stop],
        default_tools=[compaction_tool(endpoint=summarizer)],
        initial_messages=["find things about the cat"],
    )
    agent.invoke()
    after = text_of(endpoint.requests[-1])
    assert "SUMMARY via the whole-list path" in after and "finding 0" not in after
