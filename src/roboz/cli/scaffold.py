"""``roboz tool init`` and ``roboz skill init``: generate a local capability package."""

from __future__ import annotations

import importlib.util
import keyword
import os
import re
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path
from string import Template
from typing import Annotated

import typer

from roboz.cli.base import App
from roboz.cli.errors import CliError, CliUsageError

tool_app = App(help="Create local tool packages.")
skill_app = App(help="Create local skill packages.")

DEFAULT_TOOL_PATH = Path("local/tools/simpsons_quotes")
DEFAULT_SKILL_PATH = Path("local/skills/simpsons_quotes_skill")
_SNAKE_CASE = re.compile(r"^[a-z][a-z0-9_]*$")
_FILES = ("__init__.py", "tool.py")


def _check_name(destination: Path) -> str:
    name = destination.name
    if not _SNAKE_CASE.match(name) or keyword.iskeyword(name):
        raise CliUsageError(
            f"--path {destination}: the directory name {name!r} must be a lowercase "
            "snake_case Python identifier (it names the generated package and tool)"
        )
    return name


def _is_import_root(directory: Path) -> bool:
    """Directories whose children are top-level modules: the project root, src/, sys.path."""
    resolved = directory.resolve()
    if resolved == Path.cwd().resolve() or resolved.name == "src":
        return True
    return any(entry and Path(entry).resolve() == resolved for entry in sys.path)


def _shadows_module(name: str) -> bool:
    if name in sys.stdlib_module_names or name in sys.builtin_module_names:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return True  # something by that name exists but is broken: still a clash


def _render(kind: str, name: str, destination: Path) -> None:
    """Create ``destination`` complete or not at all (built beside it, then renamed)."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=destination.parent))
    try:
        templates = resources.files("roboz.cli.templates").joinpath(kind)
        for filename in _FILES:
            text = templates.joinpath(f"{filename}.tmpl").read_text(encoding="utf-8")
            (staging / filename).write_text(Template(text).substitute(name=name), encoding="utf-8")
        (staging / "requirements.txt").write_text("", encoding="utf-8")
        os.chmod(staging, 0o755)  # mkdtemp makes it private; a package should be readable
        # rename() refuses a non-empty target and this is checked again just before, so a
        # destination that appeared meanwhile is still never overwritten.
        if destination.exists():
            raise CliError(f"{destination} already exists and is never overwritten")
        staging.rename(destination)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _init(kind: str, destination: Path) -> None:
    name = _check_name(destination)
    if destination.exists():
        raise CliError(f"{destination} already exists and is never overwritten")
    if _is_import_root(destination.parent) and _shadows_module(name):
        raise CliUsageError(
            f"--path {destination}: {name!r} would shadow the importable module {name!r}; "
            f"choose another name or place it under local/{kind}s/"
        )
    try:
        _render(kind, name, destination)
    except OSError as error:
        raise CliError(f"{destination}: cannot create: {error}") from error
    typer.echo(f"Created {destination}/ (__init__.py, tool.py, requirements.txt)")
    typer.echo(_import_instruction(destination))


def _import_instruction(destination: Path) -> str:
    """How to import the package from the project root (the current directory)."""
    root = Path.cwd().resolve()
    package = destination.resolve()
    where = "from the project root"
    base = package.parent
    for candidate, note in (
        (root / "src", "with src/ on the import path (install the project, or PYTHONPATH=src)"),
        (root, where),
    ):
        if package.is_relative_to(candidate):
            parts = package.relative_to(candidate).parts
            if all(part.isidentifier() and not keyword.iskeyword(part) for part in parts):
                return f"Import it {note}: from {'.'.join(parts)} import CAPABILITY"
            break
    return (
        f"Import it with {base} on the import path (e.g. PYTHONPATH={base}): "
        f"from {package.name} import CAPABILITY"
    )


PATH_HELP = "Destination directory; its snake_case name names the package."


@tool_app.command("init")
def tool_init(
    path: Annotated[Path, typer.Option("--path", help=PATH_HELP)] = DEFAULT_TOOL_PATH,
) -> None:
    """Create a local tool package (an example returning a Simpsons quote)."""
    _init("tool", path)


@skill_app.command("init")
def skill_init(
    path: Annotated[Path, typer.Option("--path", help=PATH_HELP)] = DEFAULT_SKILL_PATH,
) -> None:
    """Create a local skill package: instructions plus their tool."""
    _init("skill", path)
