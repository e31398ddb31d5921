"""A reload that fails is reported: a `policy_reload_failed` line with the reason, and the
same reason in systemd's STATUS=, whatever kind of error it was; the old policy stays in force
and the daemon lives. Each test runs its own real daemon with a real NOTIFY_SOCKET."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from roboz_helper import host_paths, systemd
from roboz_helper.policy import Policy, load_policy
from roboz_helper.server import HelperServer

from roboz.shed.safe_scripts import SafeScriptsClient
from tests.helper_daemon import serve_command, wait_for_socket

from .conftest import OwnHelper, own_daemon_files, wait_until


@dataclass
class NotifiedHelper:
    daemon: OwnHelper
    notify: socket.socket

    def status(self) -> str:
        """The next STATUS= the daemon sent (datagrams without one, STOPPING=1, are skipped)."""
        while True:
            message = self.notify.recv(4096).decode()
            for assignment in message.split("\n"):
                if assignment.startswith("STATUS="):
                    return assignment.removeprefix("STATUS=")


@pytest.fixture
def notified_helper(needs_root: None) -> Iterator[NotifiedHelper]:
    base, socket_path, policy = own_daemon_files("roboz-helper-reload-report-")
    notify_name = f"roboz-test-notify-{uuid.uuid4().hex}"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind("\0" + notify_name)
    # A bound on a hung test, not a speed assertion.
    notify.settimeout(60)
    log_path = base / "helper.log"
    env = {**os.environ, "NOTIFY_SOCKET": "@" + notify_name}
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            serve_command(policy, socket_path), stdout=log, stderr=subprocess.STDOUT, env=env
        )
    try:
        wait_for_socket(socket_path, proc=process)
        ready = notify.recv(4096).decode().split("\n")
        assert ready[0] == "READY=1", ready
        assert ready[1] == f"STATUS=serving on {socket_path}: 2 profiles, 3 client rules", ready
        yield NotifiedHelper(OwnHelper(base, socket_path, policy, log_path, process), notify)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        notify.close()
        shutil.rmtree(base, ignore_errors=True)


def _echo(helper: OwnHelper) -> str:
    return SafeScriptsClient(helper.socket_path).exec_command(["/bin/echo", "hi"]).status


def _without_echo(text: str) -> str:
    changed = text.replace('commands = ["/bin/echo", "/bin/sh"]', 'commands = ["/bin/sh"]')
    assert "/bin/echo" not in changed
    return changed


@pytest.mark.root
@pytest.mark.parametrize(
    ("breakage", "reason"),
    [
        # These two raised a bare ValueError inside the reload task: no line, no status.
        (
            lambda text: text.replace('run_as_user = "nobody"', 'run_as_user = "²"', 1),
            "profiles.test.run_as_user: unknown user '²'",
        ),
        (
            lambda text: text.replace("[server]", '[server]\nsocket_group = "a\\u0000b"'),
            "server.socket_group: group name 'a\\x00b' contains a NUL byte",
        ),
        (
            lambda text: text.replace("nofile_max = 256", "nofile_max = 3"),
            "profiles.test.nofile_max: must be within 4..",
        ),
    ],
    ids=["superscript-uid", "nul-group", "nofile-below-4"],
)
def test_a_failed_reload_is_logged_and_shown_in_the_status(
    notified_helper: NotifiedHelper, breakage: object, reason: str
) -> None:
    helper = notified_helper.daemon
    good = helper.policy_path.read_text()
    assert callable(breakage)
    helper.write_policy(breakage(_without_echo(good)))
    line = helper.reload("policy_reload_failed")
    assert reason.replace("\\", "\\\\") in line, line
    assert 'keeping="previous policy"' in line
    status = notified_helper.status()
    assert status.startswith("policy reload failed, previous policy in force: "), status
    assert reason in status, status
    assert helper.alive()
    assert _echo(helper) == "success"  # the old policy still allows /bin/echo
    assert "Traceback" not in helper.log() and "never retrieved" not in helper.log()

    # A good file afterwards is taken, and the status says so again.
    helper.write_policy(_without_echo(good))
    helper.reload()
    assert notified_helper.status().startswith(f"serving on {helper.socket_path}: ")
    assert _echo(helper) == "refused"


@pytest.mark.root
def test_a_fifo_in_place_of_the_policy_does_not_hang_reloads(
    notified_helper: NotifiedHelper,
) -> None:
    helper = notified_helper.daemon
    good = helper.policy_path.read_text()
    helper.policy_path.unlink()
    os.mkfifo(helper.policy_path)
    line = helper.reload("policy_reload_failed")
    assert "not a regular file" in line, line
    assert "not a regular file" in notified_helper.status()
    # The reload task is free for the next signal: a good file is taken.
    helper.policy_path.unlink()
    helper.write_policy(_without_echo(good))
    helper.reload()
    wait_until(lambda: _echo(helper) == "refused", what="the reloaded policy in force")


@pytest.mark.root
def test_a_policy_file_beyond_the_size_bound_is_refused(notified_helper: NotifiedHelper) -> None:
    helper = notified_helper.daemon
    good = helper.policy_path.read_text()
    helper.write_policy(good + "#" * (1 << 20) + "\n")
    line = helper.reload("policy_reload_failed")
    assert "larger than 1048576 bytes" in line, line
    assert _echo(helper) == "success"


def test_any_exception_in_a_reload_is_reported_and_the_next_reload_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The catch-all, for failures nobody has found yet: a reload that raises something other
    than PolicyError is logged and shown in STATUS=, and the reload queued behind it runs."""
    base, socket_path, policy_path = own_daemon_files("roboz-helper-reload-unexpected-")
    notify_name = f"roboz-test-notify-{uuid.uuid4().hex}"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind("\0" + notify_name)
    notify.settimeout(60)
    monkeypatch.setattr(systemd, "_notify_address", "@" + notify_name)
    real_load = host_paths.load_usable_policy
    started, proceed = threading.Event(), threading.Event()
    calls = 0

    def load_failing_first(path: str) -> Policy:
        nonlocal calls
        calls += 1
        if calls == 1:
            started.set()
            proceed.wait(30)  # a bound on a hung test
            raise RuntimeError("directory service unreachable")
        return real_load(path)

    monkeypatch.setattr(host_paths, "load_usable_policy", load_failing_first)
    server = HelperServer(load_policy(policy_path), socket_path, str(policy_path))
    good = policy_path.read_text()
    policy_path.write_text(_without_echo(good))

    async def two_reloads() -> None:
        server.reload()
        assert await asyncio.to_thread(started.wait, 30)
        server.reload()  # arrives during the first, which fails: runs after it
        proceed.set()
        assert server._reloading is not None
        await server._reloading

    try:
        with caplog.at_level(logging.INFO, logger="roboz_helper"):
            asyncio.run(two_reloads())
        failed = [
            r.getMessage() for r in caplog.records if "policy_reload_failed" in r.getMessage()
        ]
        assert len(failed) == 1
        assert "unexpected RuntimeError('directory service unreachable')" in failed[0]
        first = notify.recv(4096).decode()
        assert first.startswith("STATUS=policy reload failed, previous policy in force: ")
        assert "directory service unreachable" in first
        assert notify.recv(4096).decode().startswith("STATUS=serving on ")
        assert server.policy.profiles["test"].commands == ("/bin/sh",)
    finally:
        notify.close()
        shutil.rmtree(base, ignore_errors=True)
