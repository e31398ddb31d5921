"""AsyncSafeScriptsClient against the real daemon: the blocking client's results on asyncio,
output as an async iterator, and cancellation that leaves nothing running."""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path

import pytest

import roboz.tools
from roboz import Agent
from roboz.llm import MockLLMEndpoint
from roboz.models import Str
from roboz.runtime import EventPipe
from roboz.runtime.events import Event, ToolFinished, ToolOutput, use_pipe
from roboz.shed.safe_scripts import (
    AsyncSafeScriptsClient,
    OutputChunk,
    SafeScriptsClient,
    ShellScriptResult,
)
from roboz.shed.safe_scripts.tool import (
    RunShellScriptInput,
    ShellScriptContext,
    ShellScriptOutcome,
    arun_shell_script,
    get_run_shell_script,
    shell_script_context,
)
from roboz.shed.safe_scripts.tool import _run_shell_script as run_shell_script_factory
from tests.shed.safe_scripts.conftest import Helper, processes_with, wait_until


def _comparable(result: ShellScriptResult) -> tuple[object, ...]:
    return (result.status, result.exit_status, result.stdout, result.stderr, result.limit)


def test_the_same_calls_give_the_same_results(helper: Helper) -> None:
    sync = SafeScriptsClient(helper.socket_path)
    aclient = AsyncSafeScriptsClient(Path(helper.socket_path))

    async def calls() -> tuple[object, ...]:
        greeting = await aclient.check()
        scripts = await aclient.list_scripts()
        ran = await aclient.run_script("greet.sh", ["you"])
        executed = await aclient.exec_command(["/bin/sh", "-c", "echo out; echo err >&2; exit 3"])
        refused = await aclient.run_script("../../bin/sh")
        return greeting, scripts, ran, executed, refused

    greeting, scripts, ran, executed, refused = asyncio.run(calls())
    assert greeting == sync.check()
    assert scripts == sync.list_scripts()
    assert _comparable(ran) == _comparable(sync.run_script("greet.sh", ["you"]))
    assert ran.stdout == "hello you\n" and ran.ok
    assert (executed.status, executed.exit_status, executed.stdout, executed.stderr) == (
        "failed",
        3,
        "out\n",
        "err\n",
    )
    assert refused.status == "refused" == sync.run_script("../../bin/sh").status


def test_output_streams_while_the_run_is_alive_then_the_result(helper: Helper) -> None:
    marker = f"astream-{uuid.uuid4().hex}"
    client = AsyncSafeScriptsClient(helper.socket_path)

    async def stream() -> tuple[list[OutputChunk], bool, ShellScriptResult | None]:
        chunks: list[OutputChunk] = []
        alive_at_first = False
        async with client.stream_script("slow.sh", ["3", "0.5", marker]) as run:
            async for chunk in run:
                if not chunks:
                    alive_at_first = bool(processes_with(marker))
                chunks.append(chunk)
        return chunks, alive_at_first, run.result

    chunks, alive_at_first, result = asyncio.run(stream())
    assert alive_at_first
    assert b"".join(c.data for c in chunks if c.stream == "stdout") == b"tick 1\ntick 2\ntick 3\n"
    assert b"".join(c.data for c in chunks if c.stream == "stderr") == b"warn 1\nwarn 2\nwarn 3\n"
    assert result is not None and result.status == "success"
    assert result.stdout == "tick 1\ntick 2\ntick 3\n"


def test_on_output_sees_everything_and_the_capture_is_capped(helper: Helper) -> None:
    seen = bytearray()
    client = AsyncSafeScriptsClient(helper.socket_path, max_capture_bytes=100)
    result = asyncio.run(
        client.run_script("lots.sh", ["1000"], on_output=lambda s, d: seen.extend(d))
    )
    assert result.output_truncated and len(result.stdout) == 100
    assert seen.decode().count("\n") == 1000


def test_cancelling_the_task_ends_the_run_and_leaves_no_process(helper: Helper) -> None:
    marker = f"acancel-{uuid.uuid4().hex}"
    client = AsyncSafeScriptsClient(helper.socket_path)

    async def cancel_mid_run() -> set[asyncio.Task[object]]:
        task = asyncio.create_task(client.run_script("sleeper.sh", [marker]))
        while len(processes_with(marker)) < 3:  # the script and both sleepers are up
            assert not task.done(), task
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]

    leftover = asyncio.run(cancel_mid_run())
    assert leftover == set()
    wait_until(lambda: not processes_with(marker), what="the cancelled run killed")


def test_leaving_a_stream_early_ends_the_run(helper: Helper) -> None:
    marker = f"aleave-{uuid.uuid4().hex}"
    client = AsyncSafeScriptsClient(helper.socket_path)

    async def first_chunk() -> OutputChunk:
        async with client.stream_script("sleeper.sh", [marker]) as run:
            async for chunk in run:
                wait_until(lambda: len(processes_with(marker)) >= 3, what="the run's processes")
                return chunk
        raise AssertionError("no output")

    assert asyncio.run(first_chunk()).data == b"ready\n"
    wait_until(lambda: not processes_with(marker), what="the abandoned run killed")


def test_the_async_body_of_run_shell_script_matches_the_tool(
    helper: Helper, tmp_path: Path
) -> None:
    ctx = shell_script_context(helper.socket_path)
    tool = get_run_shell_script(helper.socket_path)
    request = RunShellScriptInput(script="slow.sh", args=["2", "0"])
    live: list[ToolOutput] = []

    async def body() -> tuple[Str, Str]:
        with use_pipe(EventPipe([lambda e: live.append(e) if isinstance(e, ToolOutput) else None])):
            return (
                await arun_shell_script(RunShellScriptInput(), [], ctx),
                await arun_shell_script(request, [], ctx),
            )

    listing, outcome = asyncio.run(body())
    assert listing == tool.run(RunShellScriptInput(), [])
    expected = tool.run(request, [])
    assert isinstance(outcome, ShellScriptOutcome) and isinstance(expected, ShellScriptOutcome)
    assert (outcome.value, outcome.status, outcome.exit_status) == (
        expected.value,
        expected.status,
        expected.exit_status,
    )
    assert "".join(e.text for e in live if e.stream == "stdout") == "tick 1\ntick 2\n"
    unreachable = shell_script_context(tmp_path / "absent.sock")
    failed = asyncio.run(arun_shell_script(request, [], unreachable))
    assert isinstance(failed, ShellScriptOutcome) and failed.status == "helper_error"


def test_an_agent_runs_the_async_body_in_ainvoke_and_the_blocking_one_in_invoke(
    helper: Helper, tmp_path: Path
) -> None:
    absent = tmp_path / "absent.sock"
    # Each context has one working client, so the outcome shows which one the run used.
    only_async = ShellScriptContext(
        SafeScriptsClient(absent), AsyncSafeScriptsClient(Path(helper.socket_path))
    )
    only_sync = ShellScriptContext(
        SafeScriptsClient(helper.socket_path), AsyncSafeScriptsClient(absent)
    )
    replies = [
        {"action": "run_shell_script", "script": "slow.sh", "args": ["2", "0"]},
        {"action": "stop", "value": "done"},
    ]

    def run(ctx: ShellScriptContext, how: str) -> tuple[ShellScriptOutcome, set[int]]:
        outcomes: list[ShellScriptOutcome] = []
        threads: set[int] = set()

        def sink(event: Event) -> None:
            if isinstance(event, ToolOutput):
                threads.add(threading.get_ident())
            if isinstance(event, ToolFinished) and isinstance(event.output, ShellScriptOutcome):
                outcomes.append(event.output)

        agent = Agent(
            name="scripts",
            agent_endpoint=MockLLMEndpoint(replies),
            tools=[run_shell_script_factory(ctx), roboz.tools.stop],
            event_sinks=[sink],
        )
        if how == "invoke":
            agent.invoke()
        else:
            asyncio.run(agent.ainvoke())
        (outcome,) = outcomes
        return outcome, threads

    outcome, threads = run(only_async, "ainvoke")
    assert outcome.status == "success" and "tick 2" in outcome.value
    # The output arrived on the loop's thread (this one): no worker thread waited for it.
    assert threads == {threading.get_ident()}
    assert run(only_async, "invoke")[0].status == "helper_error"
    assert run(only_sync, "invoke")[0].status == "success"
    assert run(only_sync, "ainvoke")[0].status == "helper_error"
