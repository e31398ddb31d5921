"""The check-then-run pair behind every guarded Shed tool: what the executors report."""

from __future__ import annotations

import pytest

from roboz import Agent
from roboz.llm import MockLLMEndpoint
from roboz.shed.skills import FilesystemContext, PdfContext, filesystem_skill, pdf_skill
from roboz.shed.tools import patch, pdf
from roboz.tools import stop

from .fileutil import make_workspace, snapshot
from .test_pdf import pdf_bytes
from .test_skills_e2e import tool_results


class Bug(RuntimeError):
    pass


def _raise(*args: object, **kwargs: object) -> None:
    raise Bug("a bug")


@pytest.mark.parametrize(
    ("module", "function", "skill", "request_", "executor"),
    [
        (
            patch,
            "apply_literal_patch",
            lambda ws: filesystem_skill(FilesystemContext(permissions=ws.policy)),
            {"action": "apply_patch", "path": "notes/a.txt", "old_string": "a", "new_string": "b"},
            "write_patch",
        ),
        (
            pdf,
            "read_pdf",
            lambda ws: pdf_skill(PdfContext(permissions=ws.policy)),
            {"action": "process_pdf", "path": "notes/r.pdf"},
            "read_pdf_pages",
        ),
    ],
)
def test_an_executor_bug_is_reported_and_the_run_goes_on(
    tmp_path, monkeypatch, module, function, skill, request_, executor
):
    ws = make_workspace(tmp_path)
    (ws.base / "notes/r.pdf").write_bytes(pdf_bytes(["page"]))
    before = snapshot(ws.base)
    monkeypatch.setattr(module, function, _raise)
    endpoint = MockLLMEndpoint([request_, {"action": "stop", "value": "went on"}])
    agent = Agent(name="t", agent_endpoint=endpoint, tools=[stop], auto_loaded_skills=[skill(ws)])
    output, messages = agent.invoke()
    assert output.value == "went on"
    [result] = tool_results(messages, executor)
    assert "failed: internal error (Bug)" in result
    assert snapshot(ws.base) == before


def test_the_chain_condition_reads_well_in_the_agent_info(tmp_path):
    ws = make_workspace(tmp_path)
    agent = Agent(
        name="t",
        agent_endpoint=MockLLMEndpoint([]),
        tools=[stop],
        auto_loaded_skills=[filesystem_skill(FilesystemContext(permissions=ws.policy))],
    )
    info = agent.show_agent_info(print_it=False)
    assert "run_file_command -> execute_file_command when the output is a FileCommandPlan" in info
    assert "apply_patch -> write_patch when the output is a PatchRequest" in info
