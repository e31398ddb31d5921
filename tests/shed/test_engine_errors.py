"""A command that breaks while it runs is reported like one that could not be prepared: per
command, with the sequence's exit status, and the agent's run goes on."""

from __future__ import annotations

import pytest

from roboz import Agent
from roboz.llm import MockLLMEndpoint
from roboz.models import Stop
from roboz.shed.files import engine
from roboz.shed.files.base import Invocation, Prepared
from roboz.shed.skills import FilesystemContext, filesystem_skill
from roboz.tools import stop

from .fileutil import make_workspace
from .test_skills_e2e import tool_results


class Broken(RuntimeError):
    pass


@pytest.fixture
def ws(tmp_path, monkeypatch):
    """A workspace whose `wc` passes its checks and then raises while running."""
    real = engine.PREPARERS["wc"]
    pinned: list = []

    def prepare(inv: Invocation) -> Prepared:
        prepared = real(inv)
        pinned.extend(prepared.pinned)

        def run(stdin: bytes):
            raise Broken("bug")

        return Prepared(run, prepared.pinned)

    monkeypatch.setitem(engine.PREPARERS, "wc", prepare)
    workspace = make_workspace(tmp_path)
    workspace.pinned = pinned  # type: ignore[attr-defined]
    return workspace


def test_a_run_stage_exception_is_reported_per_command(ws):
    result = ws.run(
        "wc:CMD", "notes/a.txt:PTH", "&&:CTL", "cat:CMD", "notes/a.txt:PTH", "||:CTL", "pwd:CMD"
    )
    states = [c.state for c in result.commands]
    assert states == ["failed", "skipped", "ran"]
    assert "internal error (Broken) while running" in result.commands[0].reason
    assert result.exit_status == 0  # the || fallback ran
    assert "[1] $ wc notes/a.txt\n    FAILED: internal error (Broken)" in result.value
    # the descriptors pinned for the broken command were released
    assert ws.pinned and all(item._closed for item in ws.pinned)


def test_the_sequence_exit_status_is_the_failure(ws):
    result = ws.run("cat:CMD", "notes/a.txt:PTH", "|:CTL", "wc:CMD", "-l:FLG")
    assert [c.state for c in result.commands] == ["ran", "failed"]
    assert result.exit_status == engine.FAILED_STATUS
    assert f"exit status {engine.FAILED_STATUS}" in result.value


def test_the_agent_run_goes_on(ws):
    endpoint = MockLLMEndpoint(
        [
            {
                "action": "run_file_command",
                "rationale": "count",
                "value": [["wc", "CMD"], ["-l", "FLG"], ["notes/a.txt", "PTH"]],
            },
            {"action": "stop", "value": "reported"},
        ]
    )
    agent = Agent(
        name="files",
        agent_endpoint=endpoint,
        tools=[stop],
        auto_loaded_skills=[filesystem_skill(FilesystemContext(permissions=ws.policy))],
    )
    output, messages = agent.invoke()
    assert isinstance(output, Stop) and output.value == "reported"
    [report] = tool_results(messages, "execute_file_command")
    assert "internal error (Broken) while running" in report
    assert "exit status 2" in report


def test_an_os_error_without_errno_reports_its_text(tmp_path, monkeypatch):
    def prepare(inv: Invocation) -> Prepared:
        def run(stdin: bytes):
            raise OSError("the mount went away")

        return Prepared(run, [])

    monkeypatch.setitem(engine.PREPARERS, "pwd", prepare)
    result = make_workspace(tmp_path).run("pwd:CMD")
    assert result.commands[0].stderr == "the mount went away"
    assert "None" not in result.value
