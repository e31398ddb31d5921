"""One Agent, many runs: 50 concurrent ``ainvoke`` on one shared Agent against 50 separate
Agent objects doing the same work, in memory and persisted to one SQLite store.

The endpoint is scripted per run (it answers from the conversation it is shown) and yields
to the loop once per call, so what is measured is the framework's cost per step; the figure
is the ratio of steps/s of the shared agent to the separate agents, in the same run.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from roboz import Agent
from roboz.llm import Completion, ProviderRecord
from roboz.llm.endpoint import DeltaCallback
from roboz.llm.endpoints import _LocalEndpoint  # pyright: ignore[reportPrivateUsage]
from roboz.models import Message, Role, Str
from roboz.threads import SQLiteThreadStore, ThreadStore
from roboz.tools import stop, tool

RUNS = 50
STEPS = 40  # LLM-chosen work steps per run, then a Stop


class _PerRun(_LocalEndpoint):
    def __init__(self) -> None:
        super().__init__(model_name="per-run", name="per-run", max_context_tokens=128_000)

    def complete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: DeltaCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        done = sum(1 for r in records if r["role"] == "assistant")
        reply = {"action": "work", "value": str(done)} if done < STEPS else {"action": "stop"}
        return Completion(text=json.dumps(reply))

    async def acomplete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: DeltaCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        await asyncio.sleep(0)  # a provider call gives the loop away
        return self.complete(records, on_delta=on_delta, cancel=cancel)


@tool
async def work(input: Str, messages: list[Message]) -> Str:
    """One step of work (async: a sync tool would measure the loop's thread pool)."""
    return Str(value=input.value)


def _agent(index: int, store: ThreadStore | None) -> Agent:
    return Agent(name=f"a{index}", agent_endpoint=_PerRun(), tools=[work, stop], store=store)


def _ask(index: int) -> list[Message]:
    return [Message(role=Role.USER, content=f"job {index}")]


def _timed(agents: list[Agent], store: ThreadStore | None, tag: str) -> float:
    async def everyone() -> None:
        await asyncio.gather(
            *(
                agents[i % len(agents)].ainvoke(
                    _ask(i), thread_id=f"{tag}-{i}" if store is not None else None
                )
                for i in range(RUNS)
            )
        )

    started = time.perf_counter()
    asyncio.run(everyone())
    return time.perf_counter() - started


def _once(shared: bool, persisted: bool, tmp: Path, tag: str) -> float:
    # A fresh store for every measurement, so neither side runs on a larger database.
    store = SQLiteThreadStore(tmp / f"{tag}.db") if persisted else None
    try:
        agents = [_agent(0, store)] if shared else [_agent(i, store) for i in range(RUNS)]
        return _timed(agents, store, tag)
    finally:
        if store is not None:
            store.close()


def main(quick: bool = False) -> None:
    repeats = 2 if quick else 5
    steps = RUNS * (STEPS + 1)
    with tempfile.TemporaryDirectory() as tmp:
        for label, persisted in (("in memory", False), ("persisted to one store", True)):
            separate = shared = float("inf")
            for attempt in range(repeats):  # interleaved, so drift hits both sides alike
                separate = min(separate, _once(False, persisted, Path(tmp), f"sep{attempt}"))
                shared = min(shared, _once(True, persisted, Path(tmp), f"one{attempt}"))
            print(
                f"{RUNS} concurrent ainvoke, {label}: one shared Agent {steps / shared:.0f} "
                f"steps/s vs {RUNS} separate Agents {steps / separate:.0f} steps/s, ratio "
                f"{separate / shared:.2f}x (target >= 0.9x)"
            )
