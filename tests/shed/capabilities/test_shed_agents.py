"""The orchestrator and document reader recipes, end to end on the mock endpoint: declare, select,
check dependencies, build and run (scripts through the real helper daemon)."""

from __future__ import annotations

from pathlib import Path

from roboz import AgentMode
from roboz.dependencies import check_all
from roboz.deployment import SkillLoading
from roboz.llm import MockLLMEndpoint
from roboz.models import Role
from roboz.shed.agents import document_reader, orchestrator
from roboz.shed.models import ActionVerdict, Operation, PermissionRule
from roboz.shed.sandbox import PermissionPolicy, Sandbox
from tests.shed.capabilities.conftest import Helper
from tests.shed.capabilities.pdfs import write_text_pdf


def workspace(base: Path) -> PermissionPolicy:
    (base / "notes").mkdir()
    write_text_pdf(base / "notes" / "menu.pdf", ["Today: pink donuts"])
    return PermissionPolicy(
        base=base,
        default_verdict=ActionVerdict.deny,
        allow=(PermissionRule(pattern="notes/**", operations=set(Operation)),),
    )


def test_orchestrator_end_to_end(helper: Helper, tmp_path: Path) -> None:
    mock = MockLLMEndpoint(
        [
            {"action": "pdf", "rationale": "I need to read a PDF"},
            {"action": "process_pdf", "rationale": "menu", "path": "notes/menu.pdf"},
            {
                "action": "run_shell_script",
                "rationale": "greet",
                "script": "greet.sh",
                "args": ["Lisa"],
            },
            {
                "action": "apply_patch",
                "rationale": "record it",
                "path": "notes/log.md",
                "old_string": "",
                "new_string": "donuts are pink\n",
            },
            {"action": "stop", "rationale": "done", "value": "all done"},
        ]
    )
    # The helper's workdir lies inside the sandbox's root: the orchestrator's policy (read
    # anywhere in the root) narrows its runs too, and a workdir outside everything the agent
    # may read would leave its runs nothing (one policy for both tools).
    sandbox = Sandbox(helper.base).scoped(tmp_path.name)
    sandbox.prepare()
    workspace(sandbox.project_dir)
    definition = orchestrator(
        sandbox,
        socket_path=helper.socket_path,
        agent_endpoint=mock,
        librarian_endpoint=MockLLMEndpoint(["summary"] * 2, model_name="summarizer"),
    )
    assert definition.resolve_capabilities() == {
        "load_memory": True,
        "filesystem": SkillLoading.AUTOMATIC,
        "pdf": SkillLoading.ON_DEMAND,
        "stop": True,
        "run_shell_script": True,
    }
    names = {d.name for d in definition.external_dependencies()}
    assert f"helper socket {helper.socket_path}" in names and "LLM endpoint mock" in names
    assert check_all(definition.external_dependencies()) == dict.fromkeys(names)

    runtime, background = definition.build()
    output, messages = runtime.invoke()

    assert output.value == "all done" and [b.name for b in background] == ["librarian"]
    seen = " ".join(m.content for m in messages if m.role is Role.TOOL)
    assert "pink donuts" in seen
    assert "hello Lisa" in seen
    assert (sandbox.project_dir / "notes" / "log.md").read_text() == "donuts are pink\n"
    assert mock.remaining == 0


def test_orchestrator_selection_narrows_what_is_built(helper: Helper, tmp_path: Path) -> None:
    definition = orchestrator(
        Sandbox(tmp_path).scoped("work"),
        socket_path=helper.socket_path,
        agent_endpoint=MockLLMEndpoint([]),
    )
    definition.set_capability_selection({"run_shell_script": True, "load_memory": False})
    runtime, background = definition.build()
    assert [t.name for t in runtime.tools] == ["stop", "run_shell_script"]
    assert runtime.skills == () and runtime.auto_loaded_skills == () and background == ()
    definition.set_capability_selection({"pdf": SkillLoading.AUTOMATIC})
    runtime, _ = definition.build()
    assert [s.name for s in runtime.auto_loaded_skills] == ["pdf"]
    assert [t.name for t in runtime.tools] == ["stop"]


def test_orchestrator_without_a_helper_has_no_scripts(tmp_path: Path) -> None:
    definition = orchestrator(Sandbox(tmp_path).scoped("work"), agent_endpoint=MockLLMEndpoint([]))
    assert "run_shell_script" not in definition.resolve_capabilities()


def test_document_reader_reads_and_cannot_write(tmp_path: Path) -> None:
    policy = workspace(tmp_path)
    read_only = PermissionPolicy(
        base=policy.base,
        default_verdict=ActionVerdict.deny,
        allow=(PermissionRule(pattern="notes/**", operations={Operation.READ}),),
    )
    mock = MockLLMEndpoint(
        [
            {"action": "process_pdf", "rationale": "read", "path": "notes/menu.pdf"},
            {
                "action": "run_file_command",
                "rationale": "try to write",
                "value": [["touch", "CMD"], ["notes/new.md", "PTH"]],
            },
            {"action": "stop", "rationale": "answer", "value": "Pink donuts (menu.pdf, p. 1)"},
        ]
    )
    definition = document_reader(permissions=read_only, agent_endpoint=mock)
    assert definition.mode is AgentMode.AUTONOMOUS
    runtime, _ = definition.build()
    output, messages = runtime.invoke()
    assert output.value.startswith("Pink donuts")
    assert "pink donuts" in " ".join(m.content for m in messages if m.role is Role.TOOL)
    assert not (tmp_path / "notes" / "new.md").exists()
