"""The roboz app itself: help everywhere, exit codes, one-line errors, --debug."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tests.cli.helpers import assert_one_line_error, run_cli


def _commands() -> list[tuple[list[str], object]]:
    """Every command and group of the real app, walked from typer's own command tree."""
    import typer

    from roboz.cli.app import app

    found: list[tuple[list[str], object]] = []

    def walk(path: list[str], command: object) -> None:
        found.append((path, command))
        for name, child in getattr(command, "commands", {}).items():
            walk([*path, name], child)

    walk([], typer.main.get_command(app))
    return found


COMMANDS = _commands()


def _words(text: str) -> list[str]:
    return text.split()


@pytest.mark.parametrize(
    ("command", "node"), COMMANDS, ids=[" ".join(path) or "roboz" for path, _ in COMMANDS]
)
def test_every_command_has_help_that_renders_its_words(
    command: list[str], node: object, tmp_path: Path
) -> None:
    result = run_cli(*command, "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"Usage: {' '.join(['roboz', *command])}" in result.stdout
    assert list(tmp_path.iterdir()) == []  # asking for help never creates anything
    # Every word of the docstring and of each parameter's help appears as written (rich markup
    # once swallowed "[server]"); compared without line breaks, which the help re-wraps.
    shown = " ".join(_words(result.stdout))
    texts = [getattr(node, "help", None) or ""]
    texts += [getattr(param, "help", None) or "" for param in getattr(node, "params", [])]
    for text in texts:
        assert " ".join(_words(text)) in shown, text
    # No type placeholder for flags, no braces around arguments in the usage line.
    assert "<bool>" not in result.stdout
    assert "{" not in result.stdout.splitlines()[0]
    # Every command (not the groups) takes --debug.
    if not hasattr(node, "commands"):
        assert "--debug" in result.stdout
    if command == ["scripts", "serve"]:
        assert "Socket path (overrides [server] socket)." in result.stdout


def test_console_script_points_at_main() -> None:
    (script,) = entry_points(group="console_scripts", name="roboz")
    assert script.value == "roboz.cli.app:main"
    from roboz.cli.app import main

    assert script.load() is main


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["frobnicate"], "No such command 'frobnicate'"),
        (["inventory", "init", "--colour"], "No such option: --colour"),
        (["scripts", "run", "--colour", "job.sh"], "No such option: --colour"),
        (["scripts", "exec", "--colour", "/bin/true"], "No such option: --colour"),
        (["env", "encrypt"], "Missing option '--secret'"),
    ],
)
def test_invalid_arguments_exit_2_with_one_line(args: list[str], text: str, tmp_path: Path) -> None:
    result = run_cli(*args, cwd=tmp_path)
    assert_one_line_error(result, 2, text)


@pytest.mark.parametrize(
    "args",
    [
        ["inventory", "generate", "--path", "absent.json"],
        ["env", "encrypt", "--secret", "X", "--path", "absent.env"],
        ["scripts", "serve", "--policy", "absent.toml"],
    ],
    ids=["inventory generate", "env encrypt", "scripts serve"],
)
def test_a_missing_input_file_exits_2_everywhere(args: list[str], tmp_path: Path) -> None:
    result = run_cli(*args, cwd=tmp_path, env={"ROBOZ_ENV_PASSWORD": "pw"})
    assert_one_line_error(result, 2, "absent.")


def test_operational_failure_is_one_line_without_debug(tmp_path: Path) -> None:
    assert run_cli("inventory", "init", cwd=tmp_path).returncode == 0
    result = run_cli("inventory", "init", cwd=tmp_path)
    assert_one_line_error(result, 1, "already exists and is never overwritten")


@pytest.mark.parametrize("how", ["flag first", "flag last", "environment"])
def test_debug_shows_the_traceback_and_its_real_cause(tmp_path: Path, how: str) -> None:
    catalogue = tmp_path / "models.json"
    catalogue.write_text("{not json")
    args = ["inventory", "generate", "--path", str(catalogue)]
    if how == "flag first":
        result = run_cli("--debug", *args, cwd=tmp_path)
    elif how == "flag last":
        result = run_cli(*args, "--debug", cwd=tmp_path)
    else:
        result = run_cli(*args, cwd=tmp_path, env={"ROBOZ_DEBUG": "1"})
    assert result.returncode == 2, result.stderr  # an invalid input file
    assert "Traceback (most recent call last)" in result.stderr
    # The library error the one-line message came from, not only the CLI's own wrapper.
    assert "The above exception was the direct cause" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith("roboz: error: ")


def test_without_debug_there_is_no_traceback(tmp_path: Path) -> None:
    catalogue = tmp_path / "models.json"
    catalogue.write_text("{not json")
    result = run_cli("inventory", "generate", "--path", str(catalogue), cwd=tmp_path)
    assert_one_line_error(result, 2, "models.json")


def test_version_prints_the_distribution_version(tmp_path: Path) -> None:
    from importlib.metadata import version

    result = run_cli("--version", cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        f"roboz {version('roboz')}\n",
        "",
    )
