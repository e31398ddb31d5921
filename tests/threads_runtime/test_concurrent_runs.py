"""One Agent, many runs at once: threads calling ``invoke``, tasks calling ``ainvoke``, in
memory and on a real store. Each run keeps its own conversation, usage, thread rows and
events (told apart by ``run_id``); cancelling one run stops that run only."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import json
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

import roboz.tools
from roboz.agent import Agent, AgentCancelledError, AgentRun
from roboz.agent.nested import agent_tool
from roboz.llm import Completion, ProviderRecord, TokenUsage
from roboz.llm.endpoint import DeltaCallback
from roboz.llm.endpoints import _LocalEndpoint  # pyright: ignore[reportPrivateUsage]
from roboz.models import Message, Role, Stop, Str
from roboz.runtime.events import AgentFinished, Event, LLMProseDelta
from roboz.threads import (
    AgentErrorContent,
    AgentMessageStatus,
    AgentTextContent,
    AgentThreadRecord,
    AgentToolUseContent,
    ThreadStore,
)
from roboz.tools import tool


class PerRun(_LocalEndpoint):
    """Answers from the conversation it is shown, so each run gets its own script: first
    ``shout`` the user's text, then stop with it. Usage is the run's number, so a run's
    usage shows whose calls it counted. Replies stream in pieces (the persisted draft)."""

    def __init__(self) -> None:
        super().__init__(model_name="per-run", name="per-run", max_context_tokens=128_000)
        self.chunk_size = 7

    def complete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: DeltaCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        user = next(str(r["content"]) for r in records if r["role"] == "user")
        answered = any(r["role"] == "assistant" for r in records)
        reply: dict[str, Any] = (
            {"action": "stop", "rationale": f"{user} ends", "value": f"{user}!"}
            if answered
            else {"action": "shout", "rationale": f"{user} speaks", "value": user}
        )
        time.sleep(0)  # give other threads a turn inside the run
        text = json.dumps(reply)
        self._stream(text, on_delta)
        number = int(user.rsplit("-", 1)[1])
        return Completion(text=text, usage=TokenUsage(number, 1), model="per-run")

    async def acomplete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: DeltaCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        await asyncio.sleep(0)  # interleave the runs on the loop
        return self.complete(records, on_delta=on_delta, cancel=cancel)


@tool
def shout(input: Str, messages: list[Message]) -> Str:
    """Shout the text."""
    return Str(value=input.value.upper())


def _agent(store: ThreadStore | None, events: list[Event]) -> Agent:
    return Agent(
        name="server",
        agent_endpoint=PerRun(),
        tools=[shout, roboz.tools.stop],
        store=store,
        event_sinks=[events.append],
    )


def _ask(name: str) -> list[Message]:
    return [Message(role=Role.USER, content=name)]


def _own(name: str, texts: Sequence[str]) -> None:
    """Every text mentions run ``name`` and no other run (names are 'run-<n>')."""
    for text in texts:
        assert name in text or name.upper() in text, (name, text)
        for other in ("run-",):
            mentioned = [w for w in text.replace('"', " ").split() if other in w.lower()]
            assert all(w.lower().strip("!.,:") == name for w in mentioned), (name, text)


def _stored_texts(record: AgentThreadRecord) -> list[str]:
    """The text of each stored message (a streamed reply is stored in pieces)."""
    texts = [
        "".join(b.text for b in m.content if isinstance(b, AgentTextContent))
        for m in record.messages
    ]
    return [text for text in texts if text]


def _check(
    results: dict[str, tuple[Stop, list[Message]]],
    usages: dict[str, int],
    events: list[Event],
    store: ThreadStore | None,
    threads: dict[str, str],
) -> None:
    for name, (stop, conversation) in results.items():
        assert stop.value == f"{name}!"
        _own(name, [m.content for m in conversation])
        assert [m.caller for m in conversation[1:]] == ["prompt_llm", "shout", "prompt_llm", "stop"]
        assert usages[name] == 2 * int(name.rsplit("-", 1)[1])
        if store is not None:
            record = store.get_thread(threads[name])
            texts = _stored_texts(record)
            _own(name, texts)
            assert len(record.messages) == len(conversation)
    # Events of one run carry its id: grouped by it, each run's prose is its own.
    by_run: dict[str, list[Event]] = {}
    for event in events:
        assert event.run_id is not None
        by_run.setdefault(event.run_id, []).append(event)
    assert len(by_run) == len(results)
    for run_events in by_run.values():
        (finished,) = [e for e in run_events if isinstance(e, AgentFinished)]
        name = str(finished.output.value).rstrip("!")
        prose = "".join(e.text for e in run_events if isinstance(e, LLMProseDelta))
        assert prose == f"{name} speaks{name}{name} ends{name}!"  # rationale, value; twice


@pytest.fixture(params=["memory", "store"])
def where(request: pytest.FixtureRequest, store: ThreadStore) -> ThreadStore | None:
    return store if request.param == "store" else None


def test_eight_threads_calling_invoke_keep_their_runs_apart(
    where: ThreadStore | None, caplog: pytest.LogCaptureFixture
) -> None:
    events: list[Event] = []
    agent = _agent(where, events)
    results: dict[str, tuple[Stop, list[Message]]] = {}
    usages: dict[str, int] = {}
    threads: dict[str, str] = {}
    failures: list[BaseException] = []

    def serve(worker: int) -> None:
        for turn in range(3):
            name = f"run-{worker * 3 + turn + 1}"
            thread = f"t-{name}" if where is not None else None
            try:
                run = agent.new_run(_ask(name), thread)
                result = run.run_sync()
            except BaseException as error:
                failures.append(error)
                return
            assert not isinstance(result, roboz.agent.ClientToolTurn)
            results[name] = result
            usages[name] = run.usage.input_tokens
            if thread is not None:
                threads[name] = thread

    with caplog.at_level(logging.ERROR, logger="roboz.runtime.events"):
        workers = [threading.Thread(target=serve, args=(w,)) for w in range(8)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    assert failures == []
    assert not [r for r in caplog.records if "sink" in r.getMessage()]
    assert len(results) == 24
    _check(results, usages, events, where, threads)


def test_fifty_concurrent_ainvoke_keep_their_runs_apart(
    where: ThreadStore | None, caplog: pytest.LogCaptureFixture
) -> None:
    events: list[Event] = []
    agent = _agent(where, events)
    names = [f"run-{n}" for n in range(1, 51)]

    async def main() -> list[AgentRun]:
        runs = [
            await agent.astart(_ask(name), thread_id=f"t-{name}" if where else None)
            for name in names
        ]
        await asyncio.gather(*runs)
        return runs

    with caplog.at_level(logging.ERROR, logger="roboz.runtime.events"):
        runs = asyncio.run(main())
    assert not [r for r in caplog.records if "sink" in r.getMessage()]
    results: dict[str, tuple[Stop, list[Message]]] = {}
    for name, run in zip(names, runs, strict=True):
        result = run.result()
        assert not isinstance(result, roboz.agent.ClientToolTurn)
        results[name] = result
        assert result[1] is run.messages
        assert run.thread_id == (f"t-{name}" if where else None)
    usages = {name: run.usage.input_tokens for name, run in zip(names, runs, strict=True)}
    threads = {name: f"t-{name}" for name in names}
    _check(results, usages, events, where, threads)


def test_cancelling_one_of_ten_runs_stops_that_run_only(where: ThreadStore | None) -> None:
    events: list[Event] = []
    release = asyncio.Event()
    entered: set[str] = set()

    @tool
    async def shout(input: Str, messages: list[Message]) -> Str:
        """Shout the text, once released."""
        entered.add(input.value)
        await release.wait()
        return Str(value=input.value.upper())

    agent = Agent(
        name="server",
        agent_endpoint=PerRun(),
        tools=[shout, roboz.tools.stop],
        store=where,
        event_sinks=[events.append],
    )
    names = [f"run-{n}" for n in range(1, 11)]

    async def main() -> list[AgentRun]:
        runs = [
            await agent.astart(_ask(name), thread_id=f"t-{name}" if where else None)
            for name in names
        ]
        while len(entered) < len(names):
            await asyncio.sleep(0.01)
        runs[3].cancel()
        while not runs[3].done():
            await asyncio.sleep(0.01)
        release.set()
        await asyncio.gather(*runs, return_exceptions=True)
        return runs

    runs = asyncio.run(main())
    with pytest.raises(AgentCancelledError):
        runs[3].result()
    for index, (name, run) in enumerate(zip(names, runs, strict=True)):
        if index != 3:
            stop, _ = run.result()  # type: ignore[misc]
            assert stop.value == f"{name}!"
        _own(name, [m.content for m in run.messages])
        if where is not None:
            record = where.get_thread(f"t-{name}")
            texts = _stored_texts(record)
            _own(name, texts)
            if index == 3:  # the seed's CANCELLED, not a failure
                notice = record.messages[-1]
                assert notice.status is AgentMessageStatus.CANCELLED, notice
                (block,) = notice.content
                assert isinstance(block, AgentErrorContent) and block.error_code == "cancelled"
                assert "cancelled" in block.error_message
            else:
                assert not any(m.is_unsuccessful() for m in record.messages)
    assert [m.caller for m in runs[3].messages[1:]] == ["prompt_llm"]


def test_agent_cancel_cancels_every_run_in_progress() -> None:
    release = threading.Event()
    entered = threading.Semaphore(0)

    @tool
    def wait(input: Str, messages: list[Message]) -> Str:
        """Wait until released."""
        entered.release()
        release.wait(10)
        return Str(value=input.value)

    agent = Agent(
        name="server",
        agent_endpoint=_Script(),
        tools=[wait, roboz.tools.stop],
    )
    runs = [agent.start(_ask(f"run-{n}")) for n in range(1, 4)]
    for _ in runs:
        assert entered.acquire(timeout=10)
    agent.cancel()
    release.set()
    for run in runs:
        with pytest.raises(AgentCancelledError):
            run.result(timeout=10)


class _Script(PerRun):
    def complete(
        self,
        records: Sequence[ProviderRecord],
        *,
        on_delta: DeltaCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        user = next(str(r["content"]) for r in records if r["role"] == "user")
        return Completion(text=json.dumps({"action": "wait", "value": user}))


def test_a_nested_agent_called_by_two_runs_at_once_keeps_two_linked_threads(
    store: ThreadStore,
) -> None:
    child = Agent(name="helper", agent_endpoint=PerRun(), tools=[shout, roboz.tools.stop])

    class Parent(PerRun):
        def complete(
            self,
            records: Sequence[ProviderRecord],
            *,
            on_delta: DeltaCallback | None = None,
            cancel: threading.Event | None = None,
        ) -> Completion:
            user = next(str(r["content"]) for r in records if r["role"] == "user")
            answered = any(r["role"] == "assistant" for r in records)
            reply = (
                {"action": "stop", "value": user}
                if answered
                else {"action": "helper", "value": f"child-{user.rsplit('-', 1)[1]}"}
            )
            return Completion(text=json.dumps(reply))

    parent = Agent(
        name="lead",
        agent_endpoint=Parent(),
        tools=[agent_tool(child), roboz.tools.stop],
        store=store,
    )
    runs = [parent.start(_ask(f"run-{n}"), thread_id=f"p-{n}") for n in (1, 2)]
    for run in runs:
        stop, _ = run.result(timeout=30)  # type: ignore[misc]
    for n in (1, 2):
        record = store.get_thread(f"p-{n}")
        (use,) = [
            b
            for m in record.messages
            for b in m.content
            if isinstance(b, AgentToolUseContent) and b.tool_name == "helper"
        ]
        kids = store.get_thread(f"p-{n}.helper.{use.tool_use_id}")
        assert kids.parent_thread_id == f"p-{n}"
        assert kids.parent_tool_use_id == use.tool_use_id
        texts = _stored_texts(kids)
        _own(f"child-{n}", texts)


def test_the_agents_own_views_name_the_last_run_to_finish(store: ThreadStore) -> None:
    release = threading.Event()
    entered = threading.Event()

    @tool
    def shout(input: Str, messages: list[Message]) -> Str:
        """Shout the text; run-1 waits to be released."""
        if input.value == "run-1":
            entered.set()
            release.wait(10)
        return Str(value=input.value.upper())

    agent = Agent(
        name="server", agent_endpoint=PerRun(), tools=[shout, roboz.tools.stop], store=store
    )
    slow = agent.start(_ask("run-1"), thread_id="late")
    assert entered.wait(10)
    _, quick = agent.invoke(_ask("run-2"), thread_id="early")  # type: ignore[misc]
    assert agent.messages is quick and agent.thread_id == "early"
    assert agent.last_usage.input_tokens == 4
    release.set()
    _, conversation = slow.result(timeout=10)  # type: ignore[misc]
    assert agent.messages is conversation and agent.thread_id == "late"
    assert agent.last_usage.input_tokens == 2


def test_a_nested_agent_called_twice_in_parallel_by_one_parent_keeps_two_threads(
    store: ThreadStore,
) -> None:
    """One parent run's tool calls the nested agent's tool twice at once (two worker threads):
    two child threads, each with only its own conversation, both linked to the parent's
    thread and to the tool call that made them."""
    child = Agent(name="helper", agent_endpoint=PerRun(), tools=[shout, roboz.tools.stop])
    helper = agent_tool(child)

    @tool
    def fan_out(input: Str, messages: list[Message]) -> Str:
        """Ask the helper twice at once."""
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            calls = [
                pool.submit(contextvars.copy_context().run, helper.func, Str(value=v), messages)
                for v in ("child-1", "child-2")
            ]
            return Str(value=" ".join(str(call.result().value) for call in calls))

    class Parent(PerRun):
        def complete(
            self,
            records: Sequence[ProviderRecord],
            *,
            on_delta: DeltaCallback | None = None,
            cancel: threading.Event | None = None,
        ) -> Completion:
            answered = any(r["role"] == "assistant" for r in records)
            reply = (
                {"action": "stop", "value": "done"}
                if answered
                else {"action": "fan_out", "value": "x"}
            )
            return Completion(text=json.dumps(reply))

    parent = Agent(
        name="lead", agent_endpoint=Parent(), tools=[fan_out, roboz.tools.stop], store=store
    )
    stop, conversation = parent.invoke(_ask("run-0"), thread_id="fan")  # type: ignore[misc]
    assert stop.value == "done"
    assert json.loads(conversation[2].content) == {"value": "child-1! child-2!"}
    record = store.get_thread("fan")
    (use,) = [
        b
        for m in record.messages
        for b in m.content
        if isinstance(b, AgentToolUseContent) and b.tool_name == "fan_out"
    ]
    kids = [t for t in store.list_threads(limit=1000) if t.thread_id.startswith("fan.helper.")]
    assert len(kids) == 2
    owners: set[str] = set()
    for kid in kids:
        held = store.get_thread(kid.thread_id)
        assert held.parent_thread_id == "fan"
        assert held.parent_tool_use_id == use.tool_use_id
        texts = _stored_texts(held)
        owner = "child-1" if "child-1" in texts[0] else "child-2"
        _own(owner, texts)
        owners.add(owner)
    assert owners == {"child-1", "child-2"}
