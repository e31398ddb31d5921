"""What the API shows beyond threads and turns: images a tool returned (in its result's
payload, over GET, deltas and the live stream alike), who the caller is, and the goal types
each agent checks."""

from __future__ import annotations

import base64
from typing import Any

import httpx

import roboz.tools
from roboz import Agent, tool
from roboz.llm import FunctionEndpoint, ProviderRecord
from roboz.models import Empty, Image, Message, StrImage
from roboz.threads import AgentThreadRecord, AgentToolResultContent, Caller
from tests.server.conftest import PEOPLE, Served
from tests.server.ui.agents import CHART

PNG = base64.b64decode(CHART.split(",", 1)[1])


@tool
def snapshot(input: Empty, messages: list[Message]) -> StrImage:
    """Take a picture of the chart."""
    return StrImage(
        value="the chart as it is now",
        images=[Image.from_bytes(PNG), Image(url="https://example.com/c.png", detail="low")],
    )


def _reply(records: list[ProviderRecord]) -> dict[str, Any]:
    if records[-1]["role"] == "user" and str(records[-1]["content"]) == "snap it":
        return {"action": "snapshot", "rationale": "Taking it."}
    return {"action": "stop", "rationale": "Here it is.", "value": "ok"}


def _agents() -> list[Agent]:
    return [
        Agent(
            "camera",
            "You take pictures.",
            agent_endpoint=FunctionEndpoint(_reply),
            tools=[snapshot, roboz.tools.stop],
            description="takes pictures",
            goal_checks={"has_picture": lambda g, m, s: True, "is_sharp": lambda g, m, s: True},
        ),
        Agent("plain", agent_endpoint=FunctionEndpoint(_reply), tools=[roboz.tools.stop]),
    ]


def _payloads(record: AgentThreadRecord, tool_name: str) -> list[Any]:
    return [
        block.payload
        for message in record.messages
        for block in message.content
        if isinstance(block, AgentToolResultContent) and block.tool_name == tool_name
    ]


def test_images_a_tool_returns_are_in_its_result_payload_everywhere(served_on: Any) -> None:
    served: Served = served_on("sqlite", agents=_agents())
    bob = served.client("bob")
    thread = bob.create_thread()
    bob.send_message(thread.thread_id, "snap it")
    *_, streamed = bob.stream_deltas(thread.thread_id, record=thread)
    read = bob.get_thread(thread.thread_id)
    from_delta = thread.apply_delta(bob.delta(thread.thread_id, thread.continuation_token))
    expected = {
        "value": "the chart as it is now",
        "images": [
            {"url": CHART},
            {"url": "https://example.com/c.png", "detail": "low"},
        ],
    }
    assert _payloads(read, "snapshot") == [expected]
    assert _payloads(streamed, "snapshot") == [expected]
    assert _payloads(from_delta, "snapshot") == [expected]
    assert from_delta.model_dump() == read.model_dump() == streamed.model_dump()


def test_whoami_names_the_token_s_user_org_and_role(served: Served) -> None:
    for who, caller in PEOPLE.items():
        assert served.client(who).whoami() == caller
    answer = httpx.get(
        f"{served.url}/v1/ai/me", headers={"Authorization": f"Bearer {served.tokens['ann']}"}
    )
    assert answer.json() == {"user_id": "ann", "org_id": "acme", "admin": True}
    refused = httpx.get(f"{served.url}/v1/ai/me", headers={"Authorization": "Bearer rbz_nope"})
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    assert isinstance(served.client("eve").whoami(), Caller)


def test_agents_list_the_goal_types_each_checks(served_on: Any) -> None:
    served: Served = served_on("sqlite", agents=_agents())
    answer = httpx.get(
        f"{served.url}/v1/ai/agents", headers={"Authorization": f"Bearer {served.tokens['bob']}"}
    ).json()
    assert answer["default"] == "camera"
    assert [(a["name"], a["goal_types"]) for a in answer["agents"]] == [
        ("camera", ["has_picture", "is_sharp"]),
        ("plain", []),
    ]
