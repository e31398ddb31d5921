"""Agents the server tests serve: a scripted endpoint that answers from the user's last
message and streams its reply in small pieces with a pause between them (awaited, so the
server's loop sends each delta while the reply is still coming)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from typing import Any

import roboz.tools
from roboz import Agent, tool
from roboz.agent import ClientToolResult
from roboz.llm import Completion, FunctionEndpoint
from roboz.llm.records import ProviderRecord
from roboz.models import Message, Str


def _last_user_text(records: list[ProviderRecord]) -> str:
    for record in reversed(records):
        if record["role"] == "user":
            return str(record["content"])
    return ""


def reply(records: list[ProviderRecord]) -> dict[str, Any]:
    """What the scripted LLM answers: a client tool call when asked to pick files, a
    result's echo after one, else a long rationale (many deltas) and a stop."""
    last = _last_user_text(records)
    if records and records[-1]["role"] != "user" and "files" in str(records[-1]["content"]):
        return {"action": "stop", "rationale": "counted the files you picked", "value": "done"}
    if (
        "garble" in last
        and records[-1]["role"] == "user"
        and "garble" in str(records[-1]["content"])
    ):  # an unknown action: rejected, so its streamed draft is dropped and the turn rewinds
        return {"action": "fly_away", "rationale": "a first draft that will be thrown away"}
    if "pick" in last:
        return {"action": "pick_files", "rationale": "I need your files", "pattern": "*.csv"}
    words = " ".join(f"word{n}" for n in range(int(_number(last) or 12)))
    return {"action": "stop", "rationale": f"You said {last!r}. {words}", "value": "ok"}


def _number(text: str) -> int | None:
    digits = [part for part in text.split() if part.isdigit()]
    return int(digits[0]) if digits else None


class PacedEndpoint(FunctionEndpoint):
    """Streams each reply ``chunk_size`` characters at a time, ``pause_s`` apart."""

    def __init__(self, pause_s: float = 0.005, chunk_size: int = 6) -> None:
        super().__init__(reply, chunk_size=chunk_size)
        self.pause_s = pause_s

    async def acomplete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: Any = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        text = json.dumps(reply(list(records)))
        size = self.chunk_size or len(text)
        for start in range(0, len(text), size):
            if on_delta is not None:
                on_delta(text[start : start + size])
            await asyncio.sleep(self.pause_s)
        return Completion(text=text, model=self.model_name)


@tool(chained_to="pick_files")
def count_files(input: ClientToolResult, messages: list[Message]) -> Str:
    """Count the files the user picked."""
    payload = input.payload
    return Str(value=f"{len(payload) if isinstance(payload, list) else 0} files")


def make_agent(
    name: str = "helper", pause_s: float = 0.005, chunk_size: int = 6, *, picks: bool = False
) -> Agent:
    """``picks``: the agent counts files a client tool ``pick_files`` picked, in turns whose
    client offers that tool."""
    return Agent(
        name,
        "You help with files.",
        agent_endpoint=PacedEndpoint(pause_s, chunk_size),
        tools=[count_files, roboz.tools.stop] if picks else [roboz.tools.stop],
        description="answers from a script",
        goal_checks={"say_ok": lambda goal, messages, stop: True},
    )


helper = make_agent()
"""For ``roboz serve --app tests.server.agents:helper``."""
slow = make_agent("slow", pause_s=0.05)
picker = make_agent("picker", picks=True)
