"""The agent the web UI and AG-UI tests serve: a scripted endpoint (no model) that streams
its prose in small pieces, keeps a task list, asks the browser to confirm through a client
tool, shows an image, and fails when asked to.

What it does follows the user's last message:

- ``plan ...``: creates two tasks, starts the first, asks ``confirm`` (a client tool the
  frontend offers), then completes both tasks and stops, quoting the answer;
- ``pick ...``: calls the client tool ``pick_files`` and stops with what came back;
- ``chart ...``: runs ``draw_chart`` (text and a PNG image, a ``StrImage``) and stops;
- ``fail ...``: the endpoint raises, so the turn records an error;
- ``garble ...``: a first reply names an unknown action, so its draft is rewound;
- anything else: a long rationale (``N`` words when the message holds a number) and a stop.
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
import threading
import zlib
from collections.abc import Sequence
from typing import Any

import roboz.tools
from roboz import Agent, tool
from roboz.agent.tasks import TASK_TOOLS
from roboz.llm import Completion, FunctionEndpoint
from roboz.llm.records import ProviderRecord
from roboz.models import Empty, Image, Message, StrImage
from roboz.threads import ClientToolSpec

CONFIRM = ClientToolSpec(
    name="confirm",
    description="Ask the user a yes/no question in their browser.",
    input_schema={
        "type": "object",
        "properties": {"question": {"type": "string"}},
        "required": ["question"],
    },
)
PICK = ClientToolSpec(
    name="pick_files",
    description="Ask the user to pick files in their browser.",
    input_schema={"type": "object", "properties": {"pattern": {"type": "string"}}},
)

PLAN = [
    {"action": "create_task", "rationale": "First I list the work.", "title": "Read the files"},
    {"action": "create_task", "rationale": "And the second step.", "title": "Write the summary"},
    {"action": "start_task", "rationale": "Starting on the files.", "task_id": 1},
    {"action": "confirm", "rationale": "I need your go-ahead.", "question": "Delete the draft?"},
    {"action": "complete_task", "rationale": "The files are read.", "task_id": 1},
    {"action": "start_task", "rationale": "Now the summary.", "task_id": 2},
    {"action": "complete_task", "rationale": "Summary written.", "task_id": 2},
]


def _png(width: int = 24, height: int = 12) -> str:
    """A small striped PNG as a data URL, made here (no file, no network)."""
    rows = b"".join(
        b"\x00" + b"".join(bytes((40, 90 + 6 * x, 200)) for x in range(width))
        if y % 4
        else b"\x00" + b"\xf0\xa0\x20" * width
        for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )
    return "data:image/png;base64," + base64.b64encode(png).decode()


CHART = _png()


def _turn(records: list[ProviderRecord]) -> tuple[str, list[ProviderRecord]]:
    """The user's last message and what followed it."""
    for index in range(len(records) - 1, -1, -1):
        content = str(records[index]["content"])
        if records[index]["role"] == "user" and not content.startswith(("[", "{")):
            return str(records[index]["content"]), records[index + 1 :]
    return "", []


def _number(text: str) -> int | None:
    digits = [part for part in text.split() if part.isdigit()]
    return int(digits[0]) if digits else None


def reply(records: list[ProviderRecord]) -> dict[str, Any]:
    last, after = _turn(records)
    steps = sum(1 for r in after if r["role"] == "assistant")
    if last.startswith("fail"):
        raise RuntimeError("the scripted model failed, as asked")
    if last.startswith("garble") and records[-1]["content"] == last:
        # An unknown action: refused, so its streamed draft is rewound and the turn retried.
        return {"action": "fly_away", "rationale": "A first draft that will be thrown away."}
    if last.startswith("plan"):
        if steps < len(PLAN):
            return PLAN[steps]
        answer = "yes" if any("yes" in str(r["content"]) for r in after) else "no"
        return {"action": "stop", "rationale": f"All done; you said {answer}.", "value": answer}
    if last.startswith("pick"):
        if steps == 0:
            return {"action": "pick_files", "rationale": "I need your files.", "pattern": "*.csv"}
        return {"action": "stop", "rationale": "Got your files.", "value": "ok"}
    if last.startswith("chart"):
        if steps == 0:
            return {"action": "draw_chart", "rationale": "Drawing the chart."}
        return {"action": "stop", "rationale": "There is your chart.", "value": "ok"}
    words = " ".join(f"word{n}" for n in range(_number(last) or 12))
    return {"action": "stop", "rationale": f"You said {last!r}. {words}", "value": "ok"}


class PacedEndpoint(FunctionEndpoint):
    """Streams each reply ``chunk_size`` characters at a time, ``pause_s`` apart."""

    def __init__(self, pause_s: float, chunk_size: int = 8) -> None:
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


@tool
def draw_chart(input: Empty, messages: list[Message]) -> StrImage:
    """Draw a small chart of the numbers discussed."""
    return StrImage(value="The numbers, week by week", images=[Image(url=CHART)])


def make_agent(name: str = "helper", pause_s: float = 0.01) -> Agent:
    return Agent(
        name,
        "You help with files.",
        agent_endpoint=PacedEndpoint(pause_s),
        tools=[*TASK_TOOLS, draw_chart, roboz.tools.stop],
        description="answers from a script",
        goal_checks={"say_ok": lambda goal, messages, stop: True},
    )
