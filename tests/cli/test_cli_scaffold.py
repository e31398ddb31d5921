"""roboz tool init / skill init: generated packages import and run; refusals and exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import assert_one_line_error, run_cli

QUOTE_CHECK = """
import sys
sys.path.insert(0, ".")
from roboz.models import Empty, Stop
from roboz.tools import Tool
from local.tools.simpsons_quotes.tool import QUOTES, simpsons_quotes
assert isinstance(simpsons_quotes, Tool) and simpsons_quotes.name == "simpsons_quotes"
result = simpsons_quotes.run(Empty(), [])
assert isinstance(result, Stop) and result.value in QUOTES, result
print("ok")
"""

SKILL_CHECK = """
import sys
sys.path.insert(0, ".")
from roboz import Skill
from roboz.models import Empty, Stop
from local.skills.simpsons_quotes_skill.tool import QUOTES, SKILL
assert isinstance(SKILL, Skill) and SKILL.name == "simpsons_quotes_skill"
(tool,) = SKILL.tools
assert tool.name in SKILL.instructions
result = tool.run(Empty(), [])
assert isinstance(result, Stop) and result.value in QUOTES, result
print("ok")
"""

AGENT_CHECK = """
import sys
sys.path.insert(0, ".")
from roboz import Agent, AgentMode
from roboz.llm import MockLLMEndpoint
from local.tools.simpsons_quotes.tool import QUOTES, simpsons_quotes
endpoint = MockLLMEndpoint([{"action": "simpsons_quotes", "rationale": "asked for a quote"}])
agent = Agent(
    name="quotes",
    system_prompt="Quote The Simpsons.",
    agent_endpoint=endpoint,
    tools=[simpsons_quotes],
    mode=AgentMode.AUTONOMOUS,
)
result, _messages = agent.invoke()
assert result.value in QUOTES, result
print("ok")
"""

CAPABILITY_CHECK = """
import sys
sys.path.insert(0, ".")
from roboz.deployment import Capability, SkillLoading
from local.tools.simpsons_quotes import CAPABILITY as quote_tool
from local.skills.simpsons_quotes_skill import CAPABILITY as quote_skill
assert isinstance(quote_tool, Capability) and isinstance(quote_skill, Capability)
assert (quote_tool.label.name, quote_tool.label.default, quote_tool.label.selectable) == (
    "simpsons_quotes", False, True)
assert quote_skill.label.name == "simpsons_quotes_skill"
assert quote_skill.label.loading is SkillLoading.ON_DEMAND and quote_skill.label.selectable
print("ok")
"""


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_tool_init_creates_a_runnable_package(tmp_path: Path) -> None:
    result = run_cli("tool", "init", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    package = tmp_path / "local" / "tools" / "simpsons_quotes"
    assert sorted(path.name for path in package.iterdir()) == [
        "__init__.py",
        "requirements.txt",
        "tool.py",
    ]
    assert (package / "requirements.txt").read_text() == ""
    # Namespace packages: no registration files in the parents.
    assert not (tmp_path / "local" / "__init__.py").exists()
    checked = run_python(QUOTE_CHECK, tmp_path)
    assert checked.stdout.strip() == "ok", checked.stderr


def test_generated_tool_ends_an_agent_run_with_a_quote(tmp_path: Path) -> None:
    run_cli("tool", "init", cwd=tmp_path)

    checked = run_python(AGENT_CHECK, tmp_path)

    assert checked.stdout.strip() == "ok", checked.stderr


def test_skill_init_creates_a_runnable_package(tmp_path: Path) -> None:
    result = run_cli("skill", "init", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    package = tmp_path / "local" / "skills" / "simpsons_quotes_skill"
    assert sorted(path.name for path in package.iterdir()) == [
        "__init__.py",
        "requirements.txt",
        "tool.py",
    ]
    checked = run_python(SKILL_CHECK, tmp_path)
    assert checked.stdout.strip() == "ok", checked.stderr


def test_generated_capabilities_import(tmp_path: Path) -> None:
    pytest.importorskip("roboz.deployment")
    run_cli("tool", "init", cwd=tmp_path)
    run_cli("skill", "init", cwd=tmp_path)

    checked = run_python(CAPABILITY_CHECK, tmp_path)

    assert checked.stdout.strip() == "ok", checked.stderr


def test_generated_capabilities_declare_selectable_explicitly(tmp_path: Path) -> None:
    # Labels are fixed unless declared selectable=True, so a scaffold that relied on the default
    # would silently produce a capability no selection can leave out.
    run_cli("tool", "init", cwd=tmp_path)
    run_cli("skill", "init", cwd=tmp_path)
    for package in ("tools/simpsons_quotes", "skills/simpsons_quotes_skill"):
        source = (tmp_path / "local" / package / "__init__.py").read_text()
        assert "selectable=True" in source, package


def _import_line(stdout: str) -> str:
    (line,) = [line for line in stdout.splitlines() if line.startswith("Import it")]
    return line.split(": ", 1)[1]


@pytest.mark.parametrize(
    ("kind", "args", "pythonpath"),
    [
        ("tool", [], None),
        ("skill", [], None),
        ("tool", ["--path", "src/my_project/tools/quotes"], "src"),
        ("skill", ["--path", "./local/skills/guide"], None),
    ],
)
def test_the_printed_import_works_from_the_project_root(
    tmp_path: Path, kind: str, args: list[str], pythonpath: str | None
) -> None:
    result = run_cli(kind, "init", *args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    statement = _import_line(result.stdout)
    assert statement.startswith("from ") and statement.endswith(" import CAPABILITY")
    if pythonpath:
        assert f"PYTHONPATH={pythonpath}" in result.stdout
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        environment["PYTHONPATH"] = pythonpath
    # Exactly as a user runs it: a new interpreter in the project root, no path tweaks.
    checked = subprocess.run(
        [sys.executable, "-c", f"{statement}; print(type(CAPABILITY).__name__)"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.stdout.strip() == "Capability", checked.stderr


@pytest.mark.parametrize("kind", ["tool", "skill"])
def test_generated_code_passes_mypy_strict(tmp_path: Path, kind: str) -> None:
    result = run_cli(kind, "init", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "local"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Success: no issues found in 2 source files" in checked.stdout


def test_path_names_the_generated_tool(tmp_path: Path) -> None:
    result = run_cli("tool", "init", "--path", "local/tools/my_quotes", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    checked = run_python(
        "import sys; sys.path.insert(0, '.')\n"
        "from local.tools.my_quotes.tool import my_quotes\n"
        "print(my_quotes.name)",
        tmp_path,
    )
    assert checked.stdout.strip() == "my_quotes", checked.stderr


def test_existing_destination_is_never_overwritten(tmp_path: Path) -> None:
    run_cli("tool", "init", cwd=tmp_path)
    tool_file = tmp_path / "local" / "tools" / "simpsons_quotes" / "tool.py"
    tool_file.write_text("# edited\n")

    result = run_cli("tool", "init", cwd=tmp_path)

    assert_one_line_error(result, 1, "already exists and is never overwritten")
    assert tool_file.read_text() == "# edited\n"


@pytest.mark.parametrize(
    ("kind", "path", "text"),
    [
        ("tool", "local/tools/MyQuotes", "must be a lowercase snake_case Python identifier"),
        ("skill", "local/skills/my-guide", "must be a lowercase snake_case Python identifier"),
        ("tool", "local/tools/class", "must be a lowercase snake_case Python identifier"),
        ("tool", "typing", "would shadow the importable module 'typing'"),
        ("skill", "src/pydantic", "would shadow the importable module 'pydantic'"),
    ],
)
def test_bad_destinations_exit_2(tmp_path: Path, kind: str, path: str, text: str) -> None:
    result = run_cli(kind, "init", "--path", path, cwd=tmp_path)

    assert_one_line_error(result, 2, text)
    assert list(tmp_path.iterdir()) == []


def test_module_names_are_fine_below_local(tmp_path: Path) -> None:
    result = run_cli("tool", "init", "--path", "local/tools/typing", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert (tmp_path / "local" / "tools" / "typing" / "tool.py").is_file()
