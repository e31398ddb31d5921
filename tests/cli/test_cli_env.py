"""roboz env encrypt, run as a subprocess: password sources, output file, every exit code."""

from __future__ import annotations

import signal
import stat
import subprocess
from pathlib import Path

import pytest

from roboz.endpoints import decrypt_env_values, parse_env
from tests.cli.helpers import Terminal, assert_one_line_error, run_cli

PASSWORD = "tr0ub4dor&3"
SOURCE = "OPENROUTER_API_KEY=sk-or-abc\nPROTON_BRIDGE_PASSWORD='bridge pw'\nLOG_LEVEL=info\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".env").write_text(SOURCE)
    return tmp_path


def test_encrypt_with_password_from_environment(project: Path) -> None:
    result = run_cli(
        "env",
        "encrypt",
        "--secret",
        "OPENROUTER_API_KEY",
        "--secret",
        "PROTON_BRIDGE_PASSWORD",
        cwd=project,
        env={"ROBOZ_ENV_PASSWORD": PASSWORD},
    )

    assert result.returncode == 0, result.stderr
    target = project / ".env.encrypt"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert (project / ".env").read_text() == SOURCE
    text = target.read_text()
    assert "sk-or-abc" not in text and "bridge pw" not in text
    stored = parse_env(text)
    assert list(stored) == [
        "OPENROUTER_API_KEY_ENCRYPTED",
        "PROTON_BRIDGE_PASSWORD_ENCRYPTED",
        "LOG_LEVEL",
    ]
    assert decrypt_env_values(stored, password=PASSWORD) == {
        "OPENROUTER_API_KEY": "sk-or-abc",
        "PROTON_BRIDGE_PASSWORD": "bridge pw",
        "LOG_LEVEL": "info",
    }
    assert sk_free(result)


def sk_free(result: subprocess.CompletedProcess[str]) -> bool:
    return "sk-or-abc" not in result.stdout + result.stderr


def test_encrypt_another_source_with_prompted_password(project: Path) -> None:
    (project / "another.env").write_text("TOKEN=t-1\n")

    terminal = Terminal("env", "encrypt", "--secret", "TOKEN", "--path", "another.env", cwd=project)
    terminal.wait_for("Password: ")
    terminal.type(PASSWORD)
    terminal.wait_for("Repeat password: ")
    terminal.type(PASSWORD)
    result = terminal.finish()

    assert result.returncode == 0, result.stderr
    assert PASSWORD not in terminal.screen.decode()  # not echoed
    stored = parse_env((project / ".env.encrypt").read_text())
    assert decrypt_env_values(stored, password=PASSWORD) == {"TOKEN": "t-1"}


@pytest.mark.parametrize(
    ("first", "second", "text"),
    [("one", "two", "the passwords do not match"), ("", None, "the password must not be empty")],
)
def test_prompted_password_errors(project: Path, first: str, second: str | None, text: str) -> None:
    terminal = Terminal("env", "encrypt", "--secret", "LOG_LEVEL", cwd=project)
    terminal.wait_for("Password: ")
    terminal.type(first)
    if second is not None:
        terminal.wait_for("Repeat password: ")
        terminal.type(second)

    assert_one_line_error(terminal.finish(), 1, text)
    assert not (project / ".env.encrypt").exists()


def test_without_a_terminal_it_says_to_set_the_password_variable(project: Path) -> None:
    # Piped input is not a terminal: never read a password from it (it would be echoed).
    result = run_cli("env", "encrypt", "--secret", "LOG_LEVEL", cwd=project, stdin="pw\npw\n")

    assert_one_line_error(result, 2, "no terminal to ask for the password; set ROBOZ_ENV_PASSWORD")
    assert not (project / ".env.encrypt").exists()


@pytest.mark.parametrize(
    ("args", "stdin", "code", "text"),
    [
        (["--secret", "NOT_THERE"], None, 2, "--secret NOT_THERE: not set in .env"),
        (["--secret", "OPENROUTER_API_KEY_ENCRYPTED"], None, 2, "suffix is reserved"),
        (["--secret", "BAD-NAME"], None, 2, "not an environment variable name"),
        (["--secret", "LOG_LEVEL", "--path", "absent.env"], None, 2, "absent.env: no such file"),
    ],
)
def test_encrypt_errors(
    project: Path, args: list[str], stdin: str | None, code: int, text: str
) -> None:
    environment = {"ROBOZ_ENV_PASSWORD": PASSWORD} if stdin is None else {}

    result = run_cli("env", "encrypt", *args, cwd=project, env=environment, stdin=stdin)

    assert_one_line_error(result, code, text)
    assert not (project / ".env.encrypt").exists()


def test_existing_encrypted_file_is_replaced_only_with_force(project: Path) -> None:
    target = project / ".env.encrypt"
    target.write_text("ONLY_COPY_ENCRYPTED=roboz:v1:x:y:z\n")
    environment = {"ROBOZ_ENV_PASSWORD": PASSWORD}

    refused = run_cli("env", "encrypt", "--secret", "LOG_LEVEL", cwd=project, env=environment)

    assert_one_line_error(refused, 1, "already exists; pass --force to replace it")
    assert target.read_text() == "ONLY_COPY_ENCRYPTED=roboz:v1:x:y:z\n"
    forced = run_cli(
        "env", "encrypt", "--secret", "LOG_LEVEL", "--force", cwd=project, env=environment
    )
    assert forced.returncode == 0, forced.stderr
    assert "LOG_LEVEL_ENCRYPTED" in parse_env(target.read_text())


def test_ctrl_c_at_the_password_prompt_exits_130(project: Path) -> None:
    terminal = Terminal("env", "encrypt", "--secret", "LOG_LEVEL", cwd=project)
    terminal.wait_for("Password: ")
    terminal.process.send_signal(signal.SIGINT)

    assert terminal.finish().returncode == 130
    assert not (project / ".env.encrypt").exists()
