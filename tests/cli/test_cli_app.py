"""The roboz app itself: help everywhere, exit codes, one-line errors, --debug."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tests.cli.helpers import assert_one_line_error, run_cli

COMMANDS = [
    [],
    ["inventory"],
    ["inventory", "init"],
    ["inventory", "generate"],
    ["env"],
    ["env", "encrypt"],
    ["tool"],
    ["tool", "init"],
    ["skill"],
    ["skill", "init"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "roboz")
def test_every_command_has_help(command: list[str], tmp_path: Path) -> None:
    result = run_cli(*command, "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Usage: roboz" in result.stdout
    assert list(tmp_path.iterdir()) == []  # asking for help never creates anything


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
        (["env", "encrypt"], "Missing option '--secret'"),
    ],
)
def test_invalid_arguments_exit_2_with_one_line(args: list[str], text: str, tmp_path: Path) -> None:
    result = run_cli(*args, cwd=tmp_path)
    assert_one_line_error(result, 2, text)


def test_operational_failure_is_one_line_without_debug(tmp_path: Path) -> None:
    result = run_cli("inventory", "generate", cwd=tmp_path)
    assert_one_line_error(result, 1, "no catalogue here")


@pytest.mark.parametrize("how", ["flag first", "flag last", "environment"])
def test_debug_shows_the_traceback(tmp_path: Path, how: str) -> None:
    if how == "flag first":
        result = run_cli("--debug", "inventory", "generate", cwd=tmp_path)
    elif how == "flag last":
        result = run_cli("inventory", "generate", "--debug", cwd=tmp_path)
    else:
        result = run_cli("inventory", "generate", cwd=tmp_path, env={"ROBOZ_DEBUG": "1"})
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith("roboz: error: ")


@pytest.mark.parametrize(
    ("args", "remaining", "debug"),
    [
        (["inventory", "generate", "--debug"], ["inventory", "generate"], True),
        (["--debug", "tool", "init"], ["tool", "init"], True),
        # Other groups may hand --debug to the program they run; leave it to them.
        (["scripts", "run", "job.sh", "--debug"], ["scripts", "run", "job.sh", "--debug"], False),
        (["env", "encrypt", "--", "--debug"], ["env", "encrypt", "--", "--debug"], False),
    ],
)
def test_debug_flag_is_taken_only_where_it_is_ours(
    args: list[str], remaining: list[str], debug: bool
) -> None:
    from roboz.cli import app

    app._Run.debug = False
    try:
        assert app._take_debug_flag(list(args)) == remaining
        assert app._Run.debug is debug
    finally:
        app._Run.debug = False
