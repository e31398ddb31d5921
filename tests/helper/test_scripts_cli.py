"""`roboz scripts` against the real daemon: streaming, exit statuses and documented codes."""

from __future__ import annotations

import subprocess
import sys

from roboz.cli.scripts import EXIT_OUTPUT_LIMIT, EXIT_REFUSED, EXIT_UNAVAILABLE
from tests.helper.conftest import HelperDaemon


def roboz(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "roboz.cli", "scripts", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_check_shows_the_profile_and_limits(helper: HelperDaemon) -> None:
    done = roboz("check", "--socket", helper.socket_path)
    assert done.returncode == 0, done.stderr
    assert "profile 'test' for uid 0" in done.stdout
    assert "network none" in done.stdout


def test_list_prints_names_and_descriptions(helper: HelperDaemon) -> None:
    done = roboz("list", "--socket", helper.socket_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "hello.sh\tSay hello to the arguments." in lines
    assert "nocomment.sh" in lines


def test_run_streams_output_and_exits_with_the_scripts_status(helper: HelperDaemon) -> None:
    done = roboz("run", "--socket", helper.socket_path, "hello.sh", "world")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["hello world", "65534"]
    failed = roboz("run", "--socket", helper.socket_path, "fail.sh", "7")
    assert failed.returncode == 7
    assert failed.stderr.startswith("oops")


def test_exec_passes_arguments_after_the_double_dash(helper: HelperDaemon) -> None:
    done = roboz(
        "exec", "--socket", helper.socket_path, "--", "/bin/sh", "-c", "echo $0-$1", "a", "b"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "a-b\n"
    killed = roboz("exec", "--socket", helper.socket_path, "--", "/bin/sh", "-c", "kill -TERM $$")
    assert killed.returncode == 128 + 15


def test_refusals_have_their_own_code_and_a_reason(helper: HelperDaemon) -> None:
    escape = roboz("run", "--socket", helper.socket_path, "../policy.toml")
    assert escape.returncode == EXIT_REFUSED
    assert escape.stderr.startswith("roboz scripts: refused")
    not_allowed = roboz("exec", "--socket", helper.socket_path, "--", "/usr/bin/id")
    assert not_allowed.returncode == EXIT_REFUSED


def test_an_unreachable_helper_has_its_own_code(tmp_path: object) -> None:
    done = roboz("run", "--socket", "/nonexistent/helper.sock", "hello.sh")
    assert done.returncode == EXIT_UNAVAILABLE
    assert "no helper socket at /nonexistent/helper.sock" in done.stderr


def test_codes_are_distinct_from_each_other() -> None:
    from roboz.cli import scripts

    codes = [
        scripts.EXIT_TIMEOUT,
        EXIT_OUTPUT_LIMIT,
        EXIT_REFUSED,
        EXIT_UNAVAILABLE,
        scripts.EXIT_BUSY,
        scripts.EXIT_PROTOCOL,
    ]
    assert len(set(codes)) == len(codes)
