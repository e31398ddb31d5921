"""The durable runs the ``roboz serve --durable`` tests queue turns for: ``roboz worker --app
tests.server.durable_app:runs`` runs them, ``roboz serve --app tests.server.durable_app:runs
--durable`` serves the same agents' threads.

The scripted endpoint (no model) follows the user's last message:

- ``work N``: runs the tool ``work`` N times (each step a recorded DBOS step that pauses
  ``ROBOZ_TEST_STEP_S`` seconds and says which process ran it and what scope it saw), then
  stops;
- ``ask ...``: calls the client tool ``confirm`` and stops with the answer once it is back.
"""

from __future__ import annotations

import json
import os
import time

import roboz.tools
from roboz import Agent, tool
from roboz.agent import current_scope, current_viewing_context
from roboz.durable import DurableRuns
from roboz.llm import FunctionEndpoint, ProviderRecord
from roboz.models import Empty, Message

URL = os.environ.get("ROBOZ_DURABLE_URL", "")
QUEUE = os.environ.get("ROBOZ_TEST_QUEUE", "served")
STEP_S = float(os.environ.get("ROBOZ_TEST_STEP_S", "0.05"))


class Step(Empty):
    n: int


class Worked(Empty):
    n: int
    pid: int
    scope: str
    viewing: str


@tool
def work(input: Step, messages: list[Message]) -> Worked:
    """Do step n of the work."""
    time.sleep(STEP_S)
    scope, viewing = current_scope(), current_viewing_context()
    return Worked(
        n=input.n,
        pid=os.getpid(),
        scope="" if scope is None else scope.model_dump_json(exclude_none=True),
        viewing="" if viewing is None else viewing.model_dump_json(exclude_defaults=True),
    )


def _turn(records: list[ProviderRecord]) -> tuple[str, list[ProviderRecord]]:
    """The user's last message and what followed it (tool results reach the LLM as user
    records too: they start with ``[`` or ``{``)."""
    for index in range(len(records) - 1, -1, -1):
        content = str(records[index]["content"])
        if records[index]["role"] == "user" and not content.startswith(("[", "{", "Your ")):
            return content, records[index + 1 :]
    return "", []


def reply(records: list[ProviderRecord]) -> dict[str, object]:
    said, after = _turn(records)
    if said.startswith("ask"):
        answers = [r for r in after if r["role"] == "user"]
        if not answers:
            return {"action": "confirm", "rationale": "May I?", "question": "Go ahead?"}
        return {"action": "stop", "rationale": "Answered.", "value": str(answers[-1]["content"])}
    words = said.split()
    wanted = int(words[1]) if len(words) > 1 and words[1].isdigit() else 1
    done = sum(1 for r in after if r["role"] == "user" and '"pid"' in str(r["content"]))
    if done < wanted:
        return {"action": "work", "rationale": f"Step {done}.", "n": done}
    return {"action": "stop", "rationale": f"Did {done} steps.", "value": json.dumps(done)}


helper = Agent(
    "helper",
    "You work in steps.",
    agent_endpoint=FunctionEndpoint(reply),
    tools=[work, roboz.tools.stop],
    description="works in durable steps",
    goal_checks={"say_ok": lambda goal, messages, stop: True},
)

runs = DurableRuns(URL, agents=[helper], queue=QUEUE, polling_interval_s=0.05)
