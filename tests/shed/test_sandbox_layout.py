"""The Sandbox layout: no directories made, overlapping areas named, and the derived policy
enforced by the real file tools (memory and run store denied even to reads)."""

from __future__ import annotations

from pathlib import Path

import pytest

import roboz.tools
from roboz import Agent
from roboz.llm import MockLLMEndpoint
from roboz.models import Message, Role
from roboz.runtime.events import EventPipe
from roboz.shed.models import ActionVerdict, Operation
from roboz.shed.sandbox import Sandbox, SandboxError
from roboz.shed.skills import FilesystemContext, filesystem_skill


def test_describing_a_layout_makes_nothing(tmp_path: Path) -> None:
    sandbox = Sandbox(tmp_path / "root", read_only=["docs"], shared=["shared"]).scoped("p")
    sandbox.permissions()
    assert not (tmp_path / "root").exists()
    assert sandbox.run_store == tmp_path / "root" / ".roboz" / "p" / "runs.db"


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"shared": ["projects/x"]}, ("shared area", "projects area")),
        ({"read_only": ["a"], "shared": ["a/b"]}, ("read-only area", "shared area")),
        ({"state": "projects"}, ("projects area", "state area")),
    ],
)
def test_overlapping_areas_are_refused_by_name(
    tmp_path: Path, kwargs: dict[str, object], named: tuple[str, str]
) -> None:
    with pytest.raises(SandboxError) as error:
        Sandbox(tmp_path, **kwargs)  # type: ignore[arg-type]
    assert all(name in str(error.value) for name in named)


def test_bad_areas_and_projects(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="inside the root"):
        Sandbox(tmp_path, shared=["../elsewhere"])
    with pytest.raises(SandboxError, match="one directory name"):
        Sandbox(tmp_path).scoped("../p")
    with pytest.raises(SandboxError, match="no project in scope"):
        Sandbox(tmp_path).permissions()


def test_policy_verdicts(tmp_path: Path) -> None:
    sandbox = Sandbox(tmp_path, read_only=["docs"], shared=["shared"]).scoped("p")
    policy = sandbox.permissions()
    expect = {
        "docs/a": ("allow", "deny"),
        "projects/p/a": ("allow", "allow"),
        "projects/q/a": ("allow", "deny"),
        "shared/a": ("allow", "ask"),
        ".roboz/p/memory/m.md": ("deny", "deny"),
        ".roboz/p/runs.db": ("deny", "deny"),
    }
    for path, (read, write) in expect.items():
        full = tmp_path / path
        assert policy.verdict(full, Operation.READ) is ActionVerdict(read), path
        assert policy.verdict(full, Operation.CREATE) is ActionVerdict(write), path
        assert policy.verdict(full, Operation.DELETE) is ActionVerdict(write), path
    assert policy.verdict("/etc/passwd", Operation.READ) is ActionVerdict.deny


def test_file_tools_cannot_touch_memory(tmp_path: Path) -> None:
    sandbox = Sandbox(tmp_path).scoped("p").prepare()
    memory = sandbox.memory_dir / "memory-000001.md"
    memory.write_text("remember\n")
    pipe = EventPipe()
    skill = filesystem_skill(FilesystemContext(permissions=sandbox.permissions(), pipe=pipe))

    def command(*argv: str) -> dict[str, object]:
        value = [[argv[0], "CMD"], *[[a, "PTH"] for a in argv[1:]]]
        return {"action": "run_file_command", "rationale": "try", "value": value}

    replies = [
        command("cat", str(memory)),
        command("rm", str(memory)),
        command("touch", str(sandbox.run_store)),
        command("touch", "note.md"),
        {"action": "stop", "rationale": "done", "value": "done"},
    ]
    agent = Agent(
        "t",
        agent_endpoint=MockLLMEndpoint(replies),
        tools=[roboz.tools.stop],
        auto_loaded_skills=[skill],
        event_pipe=pipe,
        initial_messages=[Message(role=Role.USER, content="go")],
    )
    _, messages = agent.invoke()
    assert not any("remember" in m.content for m in messages)
    assert memory.read_text() == "remember\n" and not sandbox.run_store.exists()
    assert (sandbox.project_dir / "note.md").exists()
