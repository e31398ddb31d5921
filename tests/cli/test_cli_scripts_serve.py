"""`roboz scripts serve` runs the real daemon and exits as an interrupted command (130)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helper.conftest import build_tree, make_base, policy_text, wait_until
from tests.helper_daemon import wait_for_socket


@pytest.fixture
def policy(needs_root: None) -> Iterator[tuple[Path, str]]:
    base = make_base("roboz-cli-serve-")
    try:
        build_tree(base)
        socket_path = str(base / "helper.sock")
        path = base / "policy.toml"
        path.write_text(policy_text(base, socket_path))
        yield path, socket_path
    finally:
        shutil.rmtree(base, ignore_errors=True)


def daemons_of(parent: int) -> list[int]:
    children = Path(f"/proc/{parent}/task/{parent}/children")
    try:
        return [int(pid) for pid in children.read_text().split()]
    except OSError:
        return []


@pytest.mark.parametrize("how", ["Ctrl-C (whole process group)", "SIGINT to roboz only"])
def test_sigint_stops_the_daemon_and_exits_130(policy: tuple[Path, str], how: str) -> None:
    path, socket_path = policy
    process = subprocess.Popen(
        [sys.executable, "-m", "roboz.cli", "scripts", "serve", "--policy", str(path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        wait_for_socket(socket_path, timeout=60, proc=process)
        (daemon,) = daemons_of(process.pid)
        if how.startswith("Ctrl-C"):
            os.killpg(process.pid, signal.SIGINT)  # what a terminal does
        else:
            os.kill(process.pid, signal.SIGINT)
        assert process.wait(timeout=60) == 130, process.stderr
        # The daemon went with it: no process is left serving the socket.
        wait_until(lambda: not Path(f"/proc/{daemon}").exists(), what="the daemon to exit")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()


def test_the_daemons_errors_carry_this_commands_program_name(tmp_path: Path) -> None:
    """`roboz scripts serve` runs roboz-helper as its child: its errors still say `roboz:`."""
    bad = tmp_path / "policy.toml"
    bad.write_text(f'base = "{tmp_path}"\n')
    result = subprocess.run(
        [sys.executable, "-m", "roboz.cli", "scripts", "serve", "--policy", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("roboz: error: "), result.stderr
    assert "roboz-helper: error" not in result.stderr
