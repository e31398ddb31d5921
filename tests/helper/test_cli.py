"""The roboz-helper command behaves the same everywhere: --help on every command with the exit
codes, one error prefix, the documented exit codes, and --debug showing the real cause."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from roboz.shed.safe_scripts import SafeScriptsClient
from tests.helper_daemon import serve_command, wait_for_socket

from .conftest import own_daemon_files

COMMANDS = ("serve", "check-policy", "install-units")
PREFIX = "roboz-helper: error: "


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "roboz_helper", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("command", [(), *((c,) for c in COMMANDS)], ids=["root", *COMMANDS])
def test_every_command_has_help_with_the_exit_codes(command: tuple[str, ...]) -> None:
    shown = _cli(*command, "--help")
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "exit codes: 0 success; 1 the command could not do its job; 2 bad arguments" in text
    assert "--debug" in text
    if not command:
        for name in COMMANDS:
            assert name in text


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ((), "the following arguments are required: COMMAND"),
        (("frobnicate",), "invalid choice: 'frobnicate'"),
        (("serve",), "the following arguments are required: --policy"),
        (("check-policy", "x.toml", "--bogus"), "unrecognized arguments: --bogus"),
        (("install-units", "--prefix"), "argument --prefix: expected one argument"),
        (("serve", "--policy", "p.toml", "--log-level", "LOUD"), "invalid choice: 'LOUD'"),
    ],
)
def test_usage_errors_exit_2_with_the_prefix_and_name_the_problem(
    args: tuple[str, ...], named: str
) -> None:
    result = _cli(*args)
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(PREFIX) and named in last, result.stderr
    assert "--help" in last


def test_every_failure_has_the_prefix(tmp_path: Path) -> None:
    bad_policy = tmp_path / "bad.toml"
    bad_policy.write_text("[profiles.x\n")
    blocker = tmp_path / "file"
    blocker.write_text("")
    cases = [
        (("check-policy", str(tmp_path / "missing.toml")), 2),
        (("check-policy", str(bad_policy)), 2),
        (("serve", "--policy", str(bad_policy)), 2),
        (("serve", "--policy", str(bad_policy), "--socket", "relative.sock"), 2),
        (("install-units", "--prefix", str(blocker)), 1),
    ]
    for args, code in cases:
        result = _cli(*args)
        assert result.returncode == code, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert lines and all(line.startswith(PREFIX) for line in lines), (args, result.stderr)
        assert "Traceback" not in result.stderr


def test_debug_shows_the_real_cause(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    plain = _cli("install-units", "--prefix", str(blocker))
    assert plain.stderr.startswith(f"{PREFIX}cannot install the units: ")
    assert "Not a directory" in plain.stderr
    for args in (("--debug", "install-units"), ("install-units", "--debug")):
        debug = _cli(*args, "--prefix", str(blocker))
        assert debug.returncode == 1
        assert debug.stderr.startswith(f"{PREFIX}cannot install the units: ")
        assert "Traceback (most recent call last):" in debug.stderr
        assert "NotADirectoryError" in debug.stderr


@pytest.mark.root
def test_serve_exits_130_after_sigint_and_0_after_sigterm(needs_root: None) -> None:
    for signum, code in ((signal.SIGINT, 130), (signal.SIGTERM, 0)):
        base, socket_path, policy = own_daemon_files("roboz-helper-cli-")
        daemon = subprocess.Popen(serve_command(policy, socket_path), stderr=subprocess.PIPE)
        try:
            wait_for_socket(socket_path, proc=daemon)
            assert SafeScriptsClient(socket_path).check().profile == "test"
            daemon.send_signal(signum)
            assert daemon.wait(timeout=60) == code
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()
            assert daemon.stderr is not None
            log = daemon.stderr.read().decode()
            shutil.rmtree(base, ignore_errors=True)
        assert "roboz-helper stopped" in log and "Traceback" not in log


def test_serve_without_the_daemon_extra_says_what_to_install(tmp_path: Path) -> None:
    # A library-only install has roboz-helper without prctl.
    for name in ("scripts", "work"):
        (tmp_path / name).mkdir(mode=0o755)
        (tmp_path / name).chmod(0o755)
    policy = tmp_path / "p.toml"
    policy.write_text(
        f'[profiles.p]\nrun_as_user = "nobody"\nscripts_dir = "{tmp_path}/scripts"\n'
        f'workdir = "{tmp_path}/work"\n'
    )
    code = (
        "import sys; sys.modules['prctl'] = None\n"
        "from roboz_helper.cli import main\n"
        f"sys.exit(main(['serve', '--policy', {str(policy)!r}]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    assert result.stderr.startswith(f"{PREFIX}serve needs the daemon's dependencies (")
    assert "install 'roboz-helper[daemon]'" in result.stderr


def test_version_prints_the_distribution_version() -> None:
    from importlib.metadata import version

    result = _cli("--version")
    assert (result.returncode, result.stdout) == (0, f"roboz-helper {version('roboz-helper')}\n")
