"""Hand-written floors for the agent loop's figures: the same work, written by hand.

Each function here does what one run of the agent must do for the same result, with the same
library pieces where the work is the same (the tool functions, the value models, the
``Message`` model and its payload text, the scripted endpoint), and nothing an agent adds
around that: no events, no step or repair counting, no driver, no cancel checks, no chain
graph, no transcript. That is why each is a fair floor, and a strict one: a program with the
same outcome cannot do less per step, and where a shortcut was open to a careful hand (the
LLM records kept and extended instead of rebuilt per call) the floor takes it.

- :func:`chained_loop`: a chain start -> tick* -> done. Per step it calls the tool's function,
  checks the output is of the tool's declared type (as a typed loop must), picks the next
  tool by the same chain conditions, and records the same tool-result ``Message`` (built
  with its validating constructor, as code written by hand would).
- :func:`llm_loop`: an LLM choosing a tool 200 times, then stop. Per round it calls the same
  scripted endpoint with the records of the conversation (each message rendered once, as the
  agent's default scrubber renders it), parses the reply's JSON, validates the arguments with
  the tool's input model, calls the tool and records the two messages (the action, the
  result), as above.
- :func:`bare_insert_commit`: one row per transaction in a SQLite WAL database opened with the
  thread store's own PRAGMAs: ``BEGIN IMMEDIATE``, one ``INSERT`` of the same bytes a
  persisted run writes per message, ``COMMIT``. Nothing a store can do for a message that is
  committed when its ``append`` returns costs less.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roboz.llm import MockLLMEndpoint, ProviderRecord
from roboz.models import Empty, Int, Message, Role, Stop, Str
from roboz.models.values import payload_json
from roboz.threads._sqlite import CHECKPOINT_PAGES

ToolFunction = Callable[[Any, list[Message]], Any]


def chained_loop(
    start: ToolFunction, tick: ToolFunction, done: ToolFunction, steps: int
) -> list[Message]:
    """``start``, then ``tick`` while the count is below ``steps``, then ``done`` (a Stop)."""
    messages: list[Message] = []
    function, value, returns = start, Empty(), Int
    name = "start"
    while True:
        output = function(value, messages)
        if not isinstance(output, returns):
            raise TypeError(f"{name} returned {type(output).__name__}")
        messages.append(
            Message(
                role=Role.TOOL,
                content=payload_json(output),
                caller=name,
                message_kind="tool_result",
            )
        )
        if isinstance(output, Stop):
            return messages
        if output.value < steps:
            function, returns, name = tick, Int, "tick"
        else:
            function, returns, name = done, Stop, "done"
        value = output


def llm_loop(
    endpoint: MockLLMEndpoint,
    system_prompt: str,
    step: ToolFunction,
    input_type: type[Empty],
    rounds: int,
) -> list[Message]:
    """The endpoint chooses ``step`` (taking ``input_type``, returning Str) ``rounds`` times,
    then ``stop``."""
    messages: list[Message] = []
    records: list[ProviderRecord] = [{"role": "system", "content": system_prompt}]
    for _ in range(rounds + 1):
        text = endpoint.complete(records).text
        arguments = json.loads(text)
        action = arguments.pop("action")
        arguments.pop("rationale", None)
        messages.append(
            Message(role=Role.ASSISTANT, content=text, caller="prompt_llm", message_kind="action")
        )
        records.append({"role": "assistant", "content": text, "images": []})
        if action == "stop":
            Stop.model_validate(arguments)
            return messages
        output = step(input_type.model_validate(arguments), messages)
        if not isinstance(output, Str):
            raise TypeError(f"{action} returned {type(output).__name__}")
        result = payload_json(output)
        messages.append(
            Message(role=Role.TOOL, content=result, caller=action, message_kind="tool_result")
        )
        records.append({"role": "user", "content": f"[{action} result] {result}", "images": []})
    raise RuntimeError("the script ran out before its stop")


def bare_insert_commit(path: Path, payload: str, count: int) -> float:
    """Seconds per row: ``count`` one-row ``INSERT`` + ``COMMIT`` transactions of
    ``payload`` into a fresh WAL database at ``path``, with the thread store's PRAGMAs."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA wal_autocheckpoint = {CHECKPOINT_PAGES}")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        started = time.perf_counter()
        for _ in range(count):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO rows (body) VALUES (?)", (payload,))
            conn.execute("COMMIT")
        return (time.perf_counter() - started) / count
    finally:
        conn.close()
