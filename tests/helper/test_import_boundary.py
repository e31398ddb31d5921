"""helper/ is the trusted computing base: it imports the standard library, msgspec, prctl
and itself, nothing else. An allowlist, so a new dependency is a decision, not an
accident; and roboz_helper.protocol, which the library imports, needs msgspec alone."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

HELPER = Path(__file__).resolve().parents[2] / "helper" / "roboz_helper"
ALLOWED = frozenset({"msgspec", "prctl", "roboz_helper"})
# What those packages load themselves: prctl's C extension; msgspec uses typing_extensions
# when it is installed.
ALLOWED_TRANSITIVELY = frozenset({"_prctl", "typing_extensions"})
STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}


def _imported_roots(tree: ast.AST) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):  # fmt: skip
            roots.add(node.args[0].value.split(".")[0])
    return roots


def _outside_the_allowlist(roots: set[str], extra: frozenset[str] = frozenset()) -> list[str]:
    return sorted(r for r in roots if r not in STDLIB | ALLOWED | extra)


def test_the_checker_sees_imports_outside_the_allowlist() -> None:
    # Guard against a walker that silently finds nothing.
    tree = ast.parse(
        "import roboz.models\nfrom pydantic import BaseModel\nimport os, msgspec\n"
        "def f():\n    import openai\n    importlib.import_module('typer')\n"
        "    __import__('requests')\n"
    )
    found = _outside_the_allowlist(_imported_roots(tree))
    assert found == ["openai", "pydantic", "requests", "roboz", "typer"]


def test_every_helper_module_imports_only_the_allowlist() -> None:
    files = sorted(HELPER.rglob("*.py"))
    assert HELPER / "server.py" in files and HELPER / "sandbox" / "runner.py" in files
    offenders = {
        str(path.relative_to(HELPER)): _outside_the_allowlist(
            _imported_roots(ast.parse(path.read_text()))
        )
        for path in files
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def _loaded_by(code: str) -> list[str]:
    """Top-level modules that running `code` adds to a fresh interpreter's sys.modules."""
    script = (
        "import sys, json\n"
        "before = set(sys.modules)\n"
        f"{code}\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in set(sys.modules) - before})))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    loaded: list[str] = json.loads(result.stdout)
    return loaded


def test_importing_the_whole_helper_loads_only_the_allowlist() -> None:
    loaded = _loaded_by(
        "import importlib, pkgutil, roboz_helper\n"
        "for m in pkgutil.walk_packages(roboz_helper.__path__, 'roboz_helper.'):\n"
        "    if m.name != 'roboz_helper.__main__':\n"
        "        importlib.import_module(m.name)\n"
        "assert 'roboz_helper.server' in sys.modules"
    )
    assert "roboz_helper" in loaded
    assert _outside_the_allowlist(set(loaded), ALLOWED_TRANSITIVELY) == []


def test_the_protocol_the_library_imports_needs_msgspec_alone() -> None:
    loaded = set(_loaded_by("import roboz_helper.protocol"))
    assert "msgspec" in loaded
    assert loaded - STDLIB - {"typing_extensions"} == {"msgspec", "roboz_helper"}
