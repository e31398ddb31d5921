"""Arrows point down: roboz.threads builds on models and runtime, nothing above them."""

from __future__ import annotations

import ast
from pathlib import Path

import roboz.threads

ALLOWED = ("roboz.models", "roboz.runtime", "roboz.threads")


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_threads_imports_only_models_runtime_and_itself() -> None:
    package = Path(roboz.threads.__file__).parent
    offending = {
        f"{path.name}: {name}"
        for path in package.glob("*.py")
        for name in imported_modules(path)
        if (name == "roboz" or name.startswith("roboz.")) and not name.startswith(ALLOWED)
    }
    assert offending == set()


def test_the_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from roboz.agent import Agent\nimport roboz.llm\n")
    assert imported_modules(sample) == {"roboz.agent", "roboz.llm"}
