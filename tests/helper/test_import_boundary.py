"""helper/ is the trusted computing base: it must never import the library or its heavy deps."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

HELPER = Path(__file__).resolve().parents[2] / "helper" / "roboz_helper"
FORBIDDEN = ("roboz", "pydantic", "openai", "typer")


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
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            roots.add(node.args[0].value.split(".")[0])
    return roots


def test_the_checker_sees_forbidden_imports() -> None:
    # Guard against a walker that silently finds nothing.
    tree = ast.parse(
        "import roboz.models\nfrom pydantic import BaseModel\n"
        "def f():\n    import openai\n    importlib.import_module('typer')\n"
    )
    assert _imported_roots(tree) >= {"roboz", "pydantic", "openai", "typer"}


def test_no_helper_module_imports_the_library() -> None:
    files = sorted(HELPER.rglob("*.py"))
    assert HELPER / "server.py" in files
    offenders = {
        str(path.relative_to(HELPER)): sorted(
            _imported_roots(ast.parse(path.read_text())) & set(FORBIDDEN)
        )
        for path in files
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_importing_the_helper_loads_nothing_forbidden() -> None:
    code = (
        "import sys, json, importlib, pkgutil, roboz_helper\n"
        "for m in pkgutil.walk_packages(roboz_helper.__path__, 'roboz_helper.'):\n"
        "    if m.name != 'roboz_helper.__main__':\n"
        "        importlib.import_module(m.name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = json.loads(result.stdout)
    assert "roboz_helper.server" in loaded
    bad = [m for m in loaded if m.split(".")[0] in FORBIDDEN]
    assert bad == []
