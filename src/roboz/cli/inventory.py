"""``roboz inventory init|generate``: create and regenerate a project's model catalogue."""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Annotated

import typer

from roboz.cli.base import App
from roboz.cli.errors import CliError, CliUsageError
from roboz.endpoints.catalogue import CatalogueError
from roboz.endpoints.codegen import generate_providers

app = App(help="Create and regenerate a typed model catalogue (models.json -> providers.py).")

CATALOGUE_DIR = "model_catalogue"
CATALOGUE_JSON = "models.json"

PATH_HELP = "The catalogue JSON file (default: found from the project layout)."


def _package_name(root: Path) -> str:
    """The import name of the project: pyproject's [project].name, else the directory name."""
    name = root.resolve().name
    try:
        with (root / "pyproject.toml").open("rb") as handle:
            declared = tomllib.load(handle).get("project", {}).get("name")
        if isinstance(declared, str) and declared:
            name = declared
    except (OSError, tomllib.TOMLDecodeError):
        pass
    return re.sub(r"[-.]+", "_", name).lower()


def default_catalogue_dir(root: Path) -> Path:
    """``src/<pkg>/model_catalogue``, else ``<pkg>/model_catalogue``, else ``model_catalogue``."""
    package = _package_name(root)
    for candidate in (root / "src" / package, root / package):
        if candidate.is_dir():
            return candidate / CATALOGUE_DIR
    return root / CATALOGUE_DIR


def _json_path(path: Path | None) -> Path:
    if path is None:
        return default_catalogue_dir(Path()) / CATALOGUE_JSON
    if path.suffix != ".json" or path.is_dir():
        raise CliUsageError(f"--path {path}: name the catalogue's .json file")
    return path


@app.command()
def init(
    path: Annotated[Path | None, typer.Option("--path", help=PATH_HELP, show_default=False)] = None,
) -> None:
    """Write the bundled example models.json into the project; never overwrites it."""
    target = _json_path(path)
    if target.exists():
        raise CliError(
            f"{target} already exists and is never overwritten; delete it first to restore "
            "the bundled examples"
        )
    if path is None:
        # The default location is ours to create, as an importable package.
        target.parent.mkdir(parents=True, exist_ok=True)
        (target.parent / "__init__.py").touch(exist_ok=True)
    elif not target.parent.is_dir():
        raise CliError(f"{target.parent} does not exist; create the Python package first")
    examples = resources.files("roboz.endpoints.inventory").joinpath(CATALOGUE_JSON)
    try:
        with target.open("x", encoding="utf-8") as handle:
            handle.write(examples.read_text(encoding="utf-8"))
    except FileExistsError as error:
        raise CliError(f"{target} already exists and is never overwritten") from error
    typer.echo(f"Created {target}. Edit it, then run: roboz inventory generate")


@app.command()
def generate(
    path: Annotated[Path | None, typer.Option("--path", help=PATH_HELP, show_default=False)] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            help="The Python module to write (default: providers.py beside the JSON).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Generate providers.py from models.json; replaces only files roboz generated."""
    source = _json_path(path)
    if output is not None and output.suffix != ".py":
        raise CliUsageError(f"--output {output}: name a .py file")
    if not source.is_file():
        hint = "run roboz inventory init" if path is None else "check --path"
        raise CliUsageError(f"{source}: no catalogue here; {hint}")
    try:
        written = generate_providers(source, output)
    except CatalogueError as error:
        raise CliError(str(error)) from error
    typer.echo(f"Wrote {written}")
