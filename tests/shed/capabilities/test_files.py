"""Filesystem and Pdf bind the guarded file skills to the owner's policy and pipe."""

from __future__ import annotations

from pathlib import Path

import pytest

from roboz import AgentMode
from roboz.deployment import (
    Capability,
    DeployableAgent,
    DeploymentError,
    MissingAttributesError,
    SkillLabel,
    ToolLabel,
)
from roboz.llm import MockLLMEndpoint
from roboz.models import Role
from roboz.runtime.events import Event, EventPipe
from roboz.shed.capabilities import Filesystem, Pdf
from roboz.shed.dependency_health import ExecutableDependency
from roboz.shed.guard import PermissionDecided
from roboz.shed.models import ActionVerdict, Operation, PermissionRule
from roboz.shed.sandbox import PermissionPolicy, Sandbox
from roboz.tools import stop
from tests.shed.capabilities.pdfs import write_text_pdf


def notes_policy(base: Path) -> PermissionPolicy:
    return PermissionPolicy(
        base=base,
        default_verdict=ActionVerdict.deny,
        allow=(
            PermissionRule(
                pattern="notes/**",
                operations={Operation.READ, Operation.CREATE, Operation.DELETE},
            ),
        ),
    )


def definition(base: Path, mock: MockLLMEndpoint, *capabilities: Capability) -> DeployableAgent:
    agent = DeployableAgent(
        "files",
        "Work with notes.",
        mode=AgentMode.AUTONOMOUS,
        agent_endpoint=mock,
        capabilities=(*capabilities, Capability(label=ToolLabel("stop"), value=stop)),
        sandbox=notes_policy(base),
    )
    return agent


def test_filesystem_loads_the_complete_skill_at_start(tmp_path: Path) -> None:
    runtime, _ = definition(tmp_path, MockLLMEndpoint([]), Filesystem()).build()
    assert runtime.skills == ()
    (skill,) = runtime.auto_loaded_skills
    assert skill.name == "filesystem"
    assert "run_file_command" in skill.instructions and "apply_patch" in skill.instructions
    assert {t.name for t in skill.tools} >= {"run_file_command", "apply_patch"}


def test_filesystem_on_demand_offers_the_same_skill(tmp_path: Path) -> None:
    agent = definition(tmp_path, MockLLMEndpoint([]), Filesystem(label=SkillLabel("filesystem")))
    runtime, _ = agent.build()
    assert [s.name for s in runtime.skills] == ["filesystem"]
    assert runtime.auto_loaded_skills == ()


def test_file_capabilities_need_a_sandbox_and_the_error_names_the_setting() -> None:
    agent = DeployableAgent(
        "files", agent_endpoint=MockLLMEndpoint([]), capabilities=[Filesystem(), Pdf()]
    )
    with pytest.raises(MissingAttributesError) as caught:
        agent.build()
    message = str(caught.value)
    assert "Filesystem skill 'filesystem' needs a sandbox" in message
    assert "Pdf skill 'pdf' needs a sandbox" in message
    assert "DeployableAgent(..., sandbox=...) or agent.sandbox = ..." in message
    assert "a Sandbox layout or a PermissionPolicy" in message
    assert "set_attributes" not in message  # nothing to set there
    agent.set_capability_selection({})  # both left out: nothing is required any more
    assert agent.build()[0].auto_loaded_skills == ()


def test_filesystem_and_pdf_alone_derive_the_policy_from_a_sandbox_layout(tmp_path: Path) -> None:
    layout = Sandbox(root=tmp_path, read_only=("docs",), project="alpha").prepare()
    (tmp_path / "docs").mkdir()
    write_text_pdf(tmp_path / "docs" / "report.pdf", ["Quarterly figures"])
    mock = MockLLMEndpoint(
        [
            {
                "action": "process_pdf",
                "path": str(tmp_path / "docs" / "report.pdf"),
                "start_page": 1,
                "end_page": 1,
            },
            {"action": "run_file_command", "value": [["touch", "CMD"], ["new.md", "PTH"]]},
            {
                "action": "run_file_command",
                "value": [["touch", "CMD"], [str(tmp_path / "docs" / "x.md"), "PTH"]],
            },
            {"action": "stop", "value": "ok"},
        ]
    )
    agent = DeployableAgent(
        "files",
        mode=AgentMode.AUTONOMOUS,
        agent_endpoint=mock,
        sandbox=layout,
        capabilities=[Pdf(), Filesystem(), Capability(label=ToolLabel("stop"), value=stop)],
    )
    runtime, _ = agent.build()
    output, messages = runtime.invoke()
    assert output.value == "ok"
    results = [m.content for m in messages if m.message_kind == "tool_result"]
    assert any("Quarterly figures" in result for result in results)
    # The layout's policy: create in the scoped project, only read elsewhere in the sandbox.
    assert (layout.project_dir / "new.md").exists()
    assert not (tmp_path / "docs" / "x.md").exists()


def test_a_sandbox_of_another_kind_is_refused_when_set(tmp_path: Path) -> None:
    with pytest.raises(DeploymentError, match="sandbox must be a Sandbox layout or a Permissio"):
        DeployableAgent("files", sandbox=str(tmp_path))  # type: ignore[arg-type]
    agent = DeployableAgent("files")
    with pytest.raises(DeploymentError, match="got PosixPath"):
        agent.sandbox = tmp_path  # type: ignore[assignment]


def test_labels_of_the_wrong_kind_are_refused() -> None:
    with pytest.raises(TypeError, match="SkillLabel"):
        Filesystem(label=ToolLabel("filesystem"))  # type: ignore[arg-type]


def test_filesystem_runs_guarded_commands_on_the_deployments_pipe(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    mock = MockLLMEndpoint(
        [
            {
                "action": "run_file_command",
                "rationale": "Create a note and count its lines",
                "value": [
                    ["tee", "CMD"],
                    ["notes/todo.md", "PTH"],
                    ["&&", "CTL"],
                    ["wc", "CMD"],
                    ["-l", "FLG"],
                    ["notes/todo.md", "PTH"],
                ],
            },
            {
                "action": "run_file_command",
                "rationale": "Try outside the policy",
                "value": [["touch", "CMD"], ["secret.txt", "PTH"]],
            },
            {"action": "stop", "rationale": "done", "value": "ok"},
        ]
    )
    events: list[Event] = []
    agent = definition(tmp_path, mock, Filesystem())
    agent.event_pipe = EventPipe([events.append])
    runtime, _ = agent.build()

    output, messages = runtime.invoke()

    assert output.value == "ok"
    assert (tmp_path / "notes" / "todo.md").exists()
    assert not (tmp_path / "secret.txt").exists()
    decisions = [e for e in events if isinstance(e, PermissionDecided)]
    assert any(e.verdict == "deny" and e.path.endswith("secret.txt") for e in decisions)
    assert any(e.verdict == "allow" and e.path.endswith("todo.md") for e in decisions)
    results = [m.content for m in messages if m.role is Role.TOOL]
    assert any("secret.txt" in text and "denied" in text.lower() for text in results)


def test_filesystem_declares_the_programs_it_runs() -> None:
    declared = Filesystem().external_dependencies()
    assert ExecutableDependency("rg", purpose="run_file_command rg") in declared
    assert {d.name for d in declared} >= {"executable rg", "executable gio"}


def test_pdf_reads_an_allowed_pdf_and_refuses_one_outside(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    write_text_pdf(tmp_path / "notes" / "report.pdf", ["Chapter one: donuts", "Chapter two"])
    write_text_pdf(tmp_path / "private.pdf", ["Top secret"])
    mock = MockLLMEndpoint(
        [
            {"action": "process_pdf", "rationale": "read", "path": "notes/report.pdf"},
            {"action": "process_pdf", "rationale": "peek", "path": "private.pdf"},
            {"action": "stop", "rationale": "done", "value": "read"},
        ]
    )
    runtime, _ = definition(tmp_path, mock, Pdf()).build()
    assert [s.name for s in runtime.auto_loaded_skills] == ["pdf"]

    _, messages = runtime.invoke()

    results = [(m.caller, m.content) for m in messages if m.role is Role.TOOL]
    texts = " ".join(text for _, text in results)
    assert "Chapter one: donuts" in texts
    assert "Top secret" not in texts
    assert "private.pdf" in results[-2][1] and "denied" in results[-2][1].lower(), results
