"""The agents the durable tests' workers serve (imported by the worker processes).

``effect`` records an external effect keyed by ``idempotency_key()`` in a table of its own,
counting attempts apart from effects, and can be told (through a file) to hang inside its
step so a test can kill the worker there. ``double`` is pure. The endpoint answers from the
conversation alone, so any process replays it the same way.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import psycopg

from roboz import Agent, tool
from roboz.agent.tasks import TASK_TOOLS
from roboz.durable import DurableRuns, idempotency_key
from roboz.llm import FunctionEndpoint, ProviderRecord
from roboz.models import Empty, Message, Stop
from roboz.runtime.events import Event
from roboz.threads import AgentGoal
from roboz.tools import stop

URL = os.environ.get("ROBOZ_TEST_DURABLE_URL", "")
HANG = os.environ.get("ROBOZ_TEST_HANG", "")  # "<file>" holding n: step n waits till it changes
STEPS = int(os.environ.get("ROBOZ_TEST_STEPS", "3"))
PROGRESS = os.environ.get("ROBOZ_TEST_PROGRESS", "1") == "1"
EVENTS = os.environ.get("ROBOZ_TEST_EVENTS", "")  # a file each event's name is appended to
LIMITS = [int(n) if n else None for n in os.environ.get("ROBOZ_TEST_LIMITS", ",").split(",")]


class Step(Empty):
    n: int


class Done(Empty):
    n: int
    key: str


class Number(Empty):
    value: int


def record_effect(key: str) -> None:
    with psycopg.connect(URL, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO effects (key, attempts) VALUES (%s, 1) "
            "ON CONFLICT (key) DO UPDATE SET attempts = effects.attempts + 1",
            (key,),
        )


@tool
def effect(input: Step, messages: list[Message]) -> Done:
    """Do step n, with an effect outside."""
    key = idempotency_key()
    record_effect(key)
    if HANG:
        trigger = Path(HANG)
        if trigger.exists() and trigger.read_text() == str(input.n):
            # Written whole, then renamed: the test reads the key as soon as the file exists.
            Path(HANG + ".entering").write_text(key)
            os.replace(HANG + ".entering", HANG + ".entered")
            deadline = time.monotonic() + 600
            while trigger.read_text() == str(input.n) and time.monotonic() < deadline:
                time.sleep(0.02)  # until the test says go on (or kills this process)
    return Done(n=input.n, key=key)


PURE_CALLS = [0]


@tool(pure=True)
def double(input: Number, messages: list[Message]) -> Number:
    """Double a number."""
    PURE_CALLS[0] += 1
    return Number(value=input.value * 2)


def _said_by_user(record: ProviderRecord) -> bool:
    """A user's message, not a tool result or a repair (both reach the LLM as user records)."""
    content = record["content"]
    return record["role"] == "user" and "] " not in content and not content.startswith("Your ")


def _done(records: list[ProviderRecord]) -> list[int]:
    """The steps done in this turn (since the last user message)."""
    users = [i for i, r in enumerate(records) if _said_by_user(r)]
    found = []
    for record in records[users[-1] if users else 0 :]:
        content = record["content"]
        if record["role"] != "assistant" and '"key"' in content:
            found.append(json.loads(content.split("] ", 1)[1])["n"])
    return found


def _plan(records: list[ProviderRecord]) -> dict[str, object]:
    """A turn with goals and tasks: create a task, do step 0, stop short of the goal, and
    stop again once told the goal is not met."""
    users = [i for i, r in enumerate(records) if _said_by_user(r)]
    turn = " ".join(r["content"] for r in records[users[-1] + 1 :])
    if "Tasks:" not in turn:
        return {"action": "create_task", "title": "write it"}
    if not _done(records):
        return {"action": "effect", "n": 0}
    if "goals of the request are not met" not in turn:
        return {"action": "stop", "value": "not yet"}
    return {"action": "stop", "value": "done"}


def said_word(goal: AgentGoal, messages: list[Message], output: Stop) -> bool | str:
    word = str(getattr(goal, "word", ""))
    return word in str(output.value) or f"the answer does not say {word!r}"


def reply(records: list[ProviderRecord]) -> dict[str, object] | str:
    last = records[-1]["content"]
    said = [r["content"] for r in records if _said_by_user(r)]
    if said and said[-1] == "plan":
        return _plan(records)
    if said and said[-1] == "look it up":  # the client runs lookup, then the turn goes on
        if '"found"' not in last:
            return {"action": "lookup", "q": "answer"}
        return {"action": "stop", "value": f"the client found {last[-30:]}"}
    if said and said[-1] == "fail":
        return "not an action"  # every repair too: the run ends with AgentReplyError
    if "ask me" in last and "Tool ask_user" not in last and "four" not in last:
        return {"action": "ask_user", "question": "how many?"}
    if said and "double" in said[-1] and '"value"' not in last:
        return {"action": "double", "value": 21}
    done = _done(records)
    if len(done) < STEPS:
        return {"action": "effect", "n": len(done)}
    return {"action": "stop", "value": f"did {len(done)} steps; last said {last[-60:]}"}


def log_event(event: Event) -> None:
    if EVENTS:
        with open(EVENTS, "a") as log:
            log.write(f"{type(event).__name__}:{getattr(event, 'tool', '')}\n")


worker = Agent(
    name="worker",
    agent_endpoint=FunctionEndpoint(reply),
    tools=[effect, double, stop, *TASK_TOOLS],
    event_sinks=[log_event],
    goal_checks={"said": said_word},
)

runs = DurableRuns(
    URL,
    agents=[worker],
    polling_interval_s=0.05,
    progress=PROGRESS,
    worker_concurrency=LIMITS[0],
    concurrency=LIMITS[1],
)
