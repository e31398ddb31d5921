"""UI events built from content blocks."""

from __future__ import annotations

import pytest

from roboz.threads import AgentToolResultContent, AgentToolUseContent
from roboz.threads.event import tool_result_event, tool_use_event


def result(**fields: object) -> AgentToolResultContent:
    base: dict[str, object] = {
        "tool_use_id": "tu",
        "tool_name": "lookup",
        "runtime_ms": 9,
        "status": "success",
    }
    return AgentToolResultContent.model_validate({**base, **fields})


@pytest.mark.parametrize(
    ("fields", "output"),
    [
        ({"payload": {"a": 1}}, {"a": 1}),
        ({"payload": [1, 2]}, {"items": [1, 2]}),
        ({"payload": "text"}, {"text": "text"}),
        ({}, None),
        # The legacy envelope, when present, is what the event carries.
        (
            {"payload": "new", "raw_response": {"toolResult": {"content": []}}},
            {"toolResult": {"content": []}},
        ),
    ],
)
def test_tool_result_event_output(fields: dict[str, object], output: object) -> None:
    event = tool_result_event(result(**fields))
    assert event.output == output
    assert event.tool_use_id == "tu" and event.name == "lookup" and event.runtime_ms == 9


def test_success_follows_the_status() -> None:
    assert tool_result_event(result()).success
    assert not tool_result_event(result(status="error")).success


def test_tool_use_event_copies_the_call() -> None:
    block = AgentToolUseContent(tool_use_id="tu", tool_name="lookup", input={"q": 1})
    event = tool_use_event(block)
    assert (event.tool_use_id, event.name, event.input) == ("tu", "lookup", {"q": 1})
