"""run_shell_script shows a script's output while it runs, as ToolOutput events (bounded)."""

from __future__ import annotations

import uuid

from roboz import Agent
from roboz.llm import MockLLMEndpoint
from roboz.runtime import EventPipe
from roboz.runtime.events import Event, ToolFinished, ToolOutput, use_pipe
from roboz.shed.safe_scripts.tool import (
    RunShellScriptInput,
    ShellScriptOutcome,
    get_run_shell_script,
)
from roboz.tools import stop
from tests.shed.safe_scripts.conftest import Helper, processes_with


def test_output_arrives_as_events_while_the_script_still_runs(helper: Helper) -> None:
    marker = f"live-{uuid.uuid4().hex}"
    seen: list[Event] = []
    running_at_first_output: list[bool] = []

    def sink(event: Event) -> None:
        if isinstance(event, ToolOutput) and not running_at_first_output:
            running_at_first_output.append(bool(processes_with(marker)))
        seen.append(event)

    pipe = EventPipe([sink])
    endpoint = MockLLMEndpoint(
        [
            {
                "action": "run_shell_script",
                "rationale": "tick",
                "script": "slow.sh",
                "args": ["3", "0.5", marker],
            },
            {"action": "stop", "value": "done"},
        ]
    )
    agent = Agent(
        name="ops",
        agent_endpoint=endpoint,
        tools=[get_run_shell_script(helper.socket_path), stop],
        event_pipe=pipe,
    )
    _, messages = agent.invoke()
    # the first output came while the script (its marker argument) was still alive
    assert running_at_first_output == [True]
    names = [type(e).__name__ + ":" + getattr(e, "tool", "") for e in seen]
    started = names.index("ToolStarted:run_shell_script")
    finished = names.index("ToolFinished:run_shell_script")
    live = [e for e in seen if isinstance(e, ToolOutput)]
    assert all(started < seen.index(e) < finished for e in live)
    assert "".join(e.text for e in live if e.stream == "stdout") == "tick 1\ntick 2\ntick 3\n"
    assert "".join(e.text for e in live if e.stream == "stderr") == "warn 1\nwarn 2\nwarn 3\n"
    assert not any(e.truncated for e in live)
    # the tool's result is as before
    result = next(e for e in seen if isinstance(e, ToolFinished) and e.tool == "run_shell_script")
    assert isinstance(result.output, ShellScriptOutcome)
    assert result.output.status == "success"
    assert "stdout:\ntick 1\ntick 2\ntick 3" in result.output.value


def test_live_output_is_bounded_and_the_result_unchanged(helper: Helper) -> None:
    seen: list[ToolOutput] = []
    pipe = EventPipe([lambda e: seen.append(e) if isinstance(e, ToolOutput) else None])
    tool = get_run_shell_script(helper.socket_path, max_output_chars=300, max_live_chars=1000)
    with use_pipe(pipe):
        result = tool.run(RunShellScriptInput(script="lots.sh", args=["20000"]), [])
    assert isinstance(result, ShellScriptOutcome) and result.status == "success"
    assert sum(len(e.text) for e in seen) == 1000
    assert seen[-1].truncated and not any(e.truncated for e in seen[:-1])
    assert "".join(e.text for e in seen).startswith("line 1\nline 2\n")
    # what the LLM gets is capped by max_output_chars, as without events
    assert "line 20000" in result.value and result.output_truncated


def test_without_a_pipe_nothing_is_emitted_and_the_tool_works(helper: Helper) -> None:
    tool = get_run_shell_script(helper.socket_path)
    result = tool.run(RunShellScriptInput(script="greet.sh", args=["x"]), [])
    assert isinstance(result, ShellScriptOutcome) and "hello x" in result.value
