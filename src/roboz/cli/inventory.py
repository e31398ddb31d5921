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

app = App(help="Create and regenerate a typed model catalogue (models.json -> providers.py).")

CATALOGUE_DIR = "model_catalogue"
CATALOGUE_JSON = "models.json"

PATH_HELP = "The catalogue JSON file (default: found from the project layout)."


def _declared_name(root: Path) -> str | None:
    """The import name pyproject's [project].name gives, if there is one."""
    try:
        with (root / "pyproject.toml").open("rb") as handle:
            declared = tomllib.load(handle).get("project", {}).get("name")
    except (OSError, tomllib.TOMLDecodeError):
        return None
    if isinstance(declared, str) and declared:
        return re.sub(r"[-.]+", "_", declared).lower()
    return None


def _packages_in(directory: Path) -> list[str]:
    """Import packages directly below ``directory`` (directories with an ``__init__.py``)."""
    if not directory.is_dir():
        return []
    return sorted(
        entry.name
        for entry in directory.iterdir()
        if entry.is_dir() and (entry / "__init__.py").is_file() and entry.name.isidentifier()
    )


def default_catalogue_dir(root: Path) -> tuple[Path, str]:
    """Where the catalogue goes by default, and why (said to the user).

    ``src/<pkg>/model_catalogue`` or ``<pkg>/model_catalogue`` for the package named in
    pyproject.toml (else after the directory); in a ``src/`` holding one package, that one;
    with several and none of that name, an error asking for ``--path``; with no package at
    all, ``model_catalogue`` at the root.
    """
    declared = _declared_name(root)
    package = declared or re.sub(r"[-.]+", "_", root.resolve().name).lower()
    source = "pyproject.toml" if declared else "the project directory's name"
    for candidate in (root / "src" / package, root / package):
        if candidate.is_dir():
            return candidate / CATALOGUE_DIR, f"package {package!r}, from {source}"
    in_src = _packages_in(root / "src")
    if len(in_src) == 1:
        return root / "src" / in_src[0] / CATALOGUE_DIR, f"the only package in src/, {in_src[0]!r}"
    if in_src:
        raise CliUsageError(
            f"src/ holds several packages ({', '.join(in_src)}) and none is named {package!r} "
            f"(from {source}); choose one with --path src/<package>/{CATALOGUE_DIR}/"
            f"{CATALOGUE_JSON}"
        )
    return root / CATALOGUE_DIR, "no package found, so at the project root"


def _json_path(path: Path | None) -> tuple[Path, str | None]:
    if path is None:
        directory, reason = default_catalogue_dir(Path())
        return directory / CATALOGUE_JSON, reason
    if path.suffix != ".json" or path.is_dir():
        raise CliUsageError(f"--path {path}: name the catalogue's .json file")
    return path, None


@app.command()
def init(
    path: Annotated[Path | None, typer.Option("--path", help=PATH_HELP, show_default=False)] = None,
) -> None:
    """Write the bundled example models.json into the project; never overwrites it."""
    target, reason = _json_path(path)
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
    chosen = f" ({reason})" if reason else ""
    typer.echo(f"Created {target}{chosen}. Edit it, then run: roboz inventory generate")


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
    # Imported here: `roboz --help` should not pay for the catalogue's models.
    from roboz.endpoints.catalogue import CatalogueError, load_catalogue
    from roboz.endpoints.codegen import generate_providers

    source, _ = _json_path(path)
    if output is not None and output.suffix != ".py":
        raise CliUsageError(f"--output {output}: name a .py file")
    if not source.is_file():
        hint = "run roboz inventory init" if path is None else "check --path"
        raise CliUsageError(f"{source}: no catalogue here; {hint}")
    # An invalid catalogue is an invalid input file: exit 2, as for every invalid file (policies
    # too); only a failure to write the module afterwards is a 1.
    try:
        load_catalogue(source)
    except CatalogueError as error:
        raise CliUsageError(str(error)) from error
    try:
        written = generate_providers(source, output)
    except CatalogueError as error:
        raise CliError(str(error)) from error
    typer.echo(f"Wrote {written}")
