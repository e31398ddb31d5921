"""SafeScripts end to end: a deployed agent lists and runs scripts through the real helper."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from roboz import AgentMode
from roboz.deployment import Capability, DeployableAgent, ToolLabel
from roboz.llm import MockLLMEndpoint
from roboz.models import Message, Role
from roboz.shed.capabilities import SafeScripts
from roboz.shed.dependency_health import HelperSocketDependency
from roboz.shed.safe_scripts.tool import (
    RunShellScriptInput,
    ShellScriptOutcome,
    get_run_shell_script,
)
from roboz.tools import stop
from tests.shed.capabilities.conftest import Helper


def tool_results(messages: list[Message]) -> list[dict[str, Any]]:
    return [
        json.loads(m.content)
        for m in messages
        if m.role is Role.TOOL and m.caller == "run_shell_script"
    ]


def test_an_agent_lists_then_runs_a_script_through_the_real_helper(helper: Helper) -> None:
    mock = MockLLMEndpoint(
        [
            {"action": "run_shell_script", "rationale": "What can I run?"},
            {
                "action": "run_shell_script",
                "rationale": "Greet them",
                "script": "greet.sh",
                "args": ["Marge", "Homer"],
            },
            {"action": "stop", "rationale": "done", "value": "greeted"},
        ]
    )
    definition = DeployableAgent(
        "operator",
        "Run scripts when asked.",
        mode=AgentMode.AUTONOMOUS,
        agent_endpoint=mock,
        capabilities=[
            SafeScripts(socket_path=helper.socket_path),
            Capability(label=ToolLabel("stop", selectable=False), value=stop),
        ],
    )
    assert HelperSocketDependency(helper.socket_path) in definition.external_dependencies()
    runtime, _ = definition.build()

    output, messages = runtime.invoke()

    assert output.value == "greeted"
    listing, run = tool_results(messages)
    assert listing["scripts"] == ["chatty.sh", "fail.sh", "greet.sh"]
    assert "greet.sh: Greet the people named in the arguments." in listing["value"]
    assert run["status"] == "success" and run["exit_status"] == 0
    # The script ran sandboxed as nobody, not as the root test process.
    assert "hello Marge Homer\n65534" in run["value"]
    # What the LLM saw on its last call includes the result of the run.
    assert any("hello Marge Homer" in record["content"] for record in mock.requests[-1])


def test_a_failing_script_reports_exit_status_and_stderr(helper: Helper) -> None:
    tool = get_run_shell_script(helper.socket_path)
    result = tool.run(RunShellScriptInput(script="fail.sh", args=["3"]), [])
    assert isinstance(result, ShellScriptOutcome)
    assert (result.status, result.exit_status, result.limit) == ("failed", 3, None)
    assert "stderr:\noops" in result.value


def test_long_output_is_capped_for_the_llm_keeping_head_and_tail(helper: Helper) -> None:
    tool = get_run_shell_script(helper.socket_path, max_output_chars=200)
    result = tool.run(RunShellScriptInput(script="chatty.sh", args=["2000"]), [])
    assert isinstance(result, ShellScriptOutcome)
    assert result.status == "success"
    assert result.output_truncated
    assert "line 1\n" in result.value and "line 2000" in result.value
    assert "characters omitted" in result.value
    assert "line 1000\n" not in result.value


def test_an_unknown_script_is_refused_by_the_helper_not_run(helper: Helper) -> None:
    tool = get_run_shell_script(helper.socket_path)
    result = tool.run(RunShellScriptInput(script="../../bin/sh"), [])
    assert isinstance(result, ShellScriptOutcome)
    assert result.status == "refused"
    assert result.exit_status is None


def test_the_real_helper_passes_its_health_check(helper: Helper) -> None:
    assert HelperSocketDependency(helper.socket_path).check() is None


def test_an_unreachable_helper_is_reported_to_the_llm_not_raised(tmp_path: Path) -> None:
    socket_path = tmp_path / "absent.sock"
    tool = get_run_shell_script(socket_path)
    for request in (RunShellScriptInput(), RunShellScriptInput(script="greet.sh")):
        result = tool.run(request, [])
        assert isinstance(result, ShellScriptOutcome)
        assert result.status == "helper_error"
        assert f"no helper socket at {socket_path}" in result.value


def test_a_missing_helper_socket_fails_the_build_with_the_fix(tmp_path: Path) -> None:
    """Without a socket the agent is not built: the LLM is never left to find out mid-run."""
    import pytest

    from roboz.deployment import DeploymentError

    absent = tmp_path / "wrong.sock"
    definition = DeployableAgent(
        "operator",
        "Run scripts when asked.",
        mode=AgentMode.AUTONOMOUS,
        agent_endpoint=MockLLMEndpoint([]),
        capabilities=[
            SafeScripts(socket_path=absent),
            Capability(label=ToolLabel("stop", selectable=False), value=stop),
        ],
    )
    with pytest.raises(DeploymentError) as raised:
        definition.build()
    message = str(raised.value)
    assert f"no helper socket at {absent}" in message
    assert "roboz scripts serve --policy FILE" in message and "\n" not in message
    # Left out of the selection, it is not built, so nothing is checked.
    definition.set_capability_selection({"run_shell_script": False})
    runtime, _ = definition.build()
    assert [t.name for t in runtime.tools] == ["stop"]
