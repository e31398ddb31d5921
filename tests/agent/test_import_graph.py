"""The shape of the house, read from the import graph (every import, lazy and TYPE_CHECKING
ones included: a circle drawn only for the type checker is still a circle).

- no import circle inside ``roboz.agent``;
- nothing ``roboz.agent.agent`` builds on (its imports, transitively, anywhere in roboz)
  imports it back;
- ``INSERT``/``UPDATE``/``DELETE`` on the thread tables appear only in ``roboz.threads.writer``
  (and the schema's migrations).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import roboz

SRC = Path(roboz.__file__).parent


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    modules = {_module(p): p for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                deps.add(base)
                deps.update(f"{base}.{a.name}" for a in node.names)
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def _cycle(graph: dict[str, set[str]], nodes: set[str]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph[node] & nodes):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state and (found := visit(dep)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(nodes):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_circle_inside_the_agent_package() -> None:
    graph = _graph()
    # The package's __init__ only gathers the public names; it is not part of the layering.
    inside = {m for m in graph if m.startswith("roboz.agent.")}
    assert _cycle(graph, inside) is None


def test_nothing_below_agent_py_imports_it() -> None:
    graph = _graph()
    below: set[str] = set()
    todo = list(graph["roboz.agent.agent"])
    while todo:
        module = todo.pop()
        if module in below or module == "roboz.agent.agent":
            continue
        below.add(module)
        todo.extend(graph[module] - {"roboz.agent"})  # the package face sits on top
    offenders = sorted(m for m in below if "roboz.agent.agent" in graph[m])
    assert offenders == []
    assert "roboz.agent.context" in below and "roboz.agent.session" in below


_WRITE = re.compile(
    r"\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+[\w.{}\"]*\b"
    r"(threads|messages|resets|compressed|thread_tasks|thread_goals)\b",
    re.IGNORECASE,
)


def test_the_write_pattern_sees_a_schema_qualified_table() -> None:
    for sql in (
        'UPDATE "{schema}".threads SET',
        "INSERT INTO {s}.messages (",
        "delete from resets",
    ):
        assert _WRITE.search(sql), sql


def test_thread_tables_are_written_only_in_threads() -> None:
    writers = sorted(_module(path) for path in SRC.rglob("*.py") if _WRITE.search(path.read_text()))
    # The schema migrations rewrite rows once, when the store's schema changes.
    assert writers == ["roboz.threads._schema", "roboz.threads.writer"]
