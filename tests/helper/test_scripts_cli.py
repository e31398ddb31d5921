"""`roboz scripts` against the real daemon: streaming, exit statuses and documented codes."""

from __future__ import annotations

import contextlib
import io
import subprocess
from pathlib import Path

from roboz.cli.app import main
from roboz.cli.scripts import EXIT_OUTPUT_LIMIT, EXIT_REFUSED, EXIT_TIMEOUT, EXIT_UNAVAILABLE
from tests.cli.helpers import run_cli
from tests.helper.conftest import TIGHT_UID, HelperDaemon, as_user


def roboz(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("scripts", *args, cwd=Path.cwd())


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
    assert escape.stderr.startswith("roboz: error: refused")
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


def _text_stream() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO())  # the CLI streams a run's output to .buffer


def _cli_as_tight_client(socket_path: str, args: list[str]) -> tuple[int, str]:
    """Run `roboz scripts ...` in-process as the uid whose profile has small limits.

    In-process in a forked child: the interpreter's files need not be readable by that uid,
    so a quick run through the same code path happens here first, to import everything.
    """
    with contextlib.redirect_stdout(_text_stream()), contextlib.redirect_stderr(_text_stream()):
        main(["scripts", "run", "--socket", socket_path, "hello.sh"])

    def job() -> str:
        errors = _text_stream()
        with contextlib.redirect_stdout(_text_stream()), contextlib.redirect_stderr(errors):
            code = main(["scripts", "run", "--socket", socket_path, *args])
        errors.flush()
        assert isinstance(errors.buffer, io.BytesIO)
        return f"{code}\n{errors.buffer.getvalue().decode()}"

    code, _, stderr = as_user(TIGHT_UID, TIGHT_UID, job).partition("\n")
    return int(code), stderr


def test_a_timeout_exits_124_with_the_reason(helper: HelperDaemon) -> None:
    code, stderr = _cli_as_tight_client(helper.socket_path, ["sleeper.sh", "roboz-cli-timeout"])
    assert code == EXIT_TIMEOUT, stderr
    assert stderr.splitlines()[-1].startswith("roboz: error: timeout (timeout limit)")


def test_an_output_flood_exits_125_with_the_reason(helper: HelperDaemon) -> None:
    code, stderr = _cli_as_tight_client(helper.socket_path, ["lots.sh", "100000"])
    assert code == EXIT_OUTPUT_LIMIT, stderr
    # The script's own stderr came first; the reason is the last line.
    assert stderr.splitlines()[-1].startswith("roboz: error: output_limit (output limit)")


def test_a_helper_that_stops_mid_run_exits_69_the_documented_unavailable_code() -> None:
    """The completion a helper sends for a run it ends at shutdown (killed, no limit, no
    signal) is reported with the code for an unavailable helper, not a bare 1."""
    import pytest

    from roboz.cli.errors import CliError
    from roboz.cli.scripts import EXIT_UNAVAILABLE, _finish
    from roboz.shed.safe_scripts.client import ShellScriptResult

    stopped = ShellScriptResult(
        status="killed", exit_code=None, signal=None, stdout="", stderr="",
        diagnostic="the helper is shutting down", wall_time_s=0.1, cpu_time_s=0.0,
        peak_memory_bytes=0, limit=None,
    )  # fmt: skip
    with pytest.raises(CliError) as raised:
        _finish(stopped)
    assert raised.value.exit_code == EXIT_UNAVAILABLE == 69
    assert "the helper stopped the run: the helper is shutting down" in str(raised.value)
