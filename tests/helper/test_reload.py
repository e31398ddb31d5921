"""SIGHUP reloads the policy (what `systemctl reload` sends): new connections get the new
policy, exchanges under way keep theirs, a bad file changes nothing, and no signal a reload or
a vanished peer brings can kill the daemon. Each test runs its own real daemon."""

from __future__ import annotations

import os
import signal

import pytest
from roboz_helper import protocol
from roboz_helper.protocol import Greeting, RunCompletion

from roboz.shed.safe_scripts import SafeScriptsClient

from .conftest import OwnHelper, wait_until
from .wire import raw_connect, read_frame, read_until_eof

pytestmark = pytest.mark.root


def _without_echo(text: str) -> str:
    """The same policy, but /bin/echo is no longer allowed and runs get 7 s."""
    changed = text.replace('commands = ["/bin/echo", "/bin/sh"]', 'commands = ["/bin/sh"]')
    changed = changed.replace("timeout_s = 60.0", "timeout_s = 7.0")
    assert changed.count("/bin/echo") == 0 and "timeout_s = 7.0" in changed
    return changed


def _echo(helper: OwnHelper) -> str:
    return SafeScriptsClient(helper.socket_path).exec_command(["/bin/echo", "hi"]).status


def test_reload_applies_to_new_connections_and_not_to_exchanges_under_way(
    own_helper: OwnHelper,
) -> None:
    assert _echo(own_helper) == "success"
    # Greeted under the old policy, request sent after the reload.
    early = raw_connect(own_helper.socket_path)
    greeting = read_frame(early)
    assert isinstance(greeting, Greeting) and greeting.limits.timeout_s == 60.0
    # A run in flight across the reload, under the old policy's 60 s timeout.
    running = raw_connect(own_helper.socket_path)
    assert isinstance(read_frame(running), Greeting)
    script = "sleep 1.5; echo finished"
    running.sendall(protocol.encode_frame(protocol.ExecCommand(argv=["/bin/sh", "-c", script])))

    own_helper.write_policy(_without_echo(own_helper.policy_path.read_text()))
    line = own_helper.reload()
    assert f"path={own_helper.policy_path}" in line
    assert "profiles=2 clients=3" in line and 'applies_to="new connections"' in line

    refused = SafeScriptsClient(own_helper.socket_path).exec_command(["/bin/echo", "hi"])
    assert refused.status == "refused" and "not allowed" in refused.diagnostic
    assert SafeScriptsClient(own_helper.socket_path).check().limits.timeout_s == 7.0
    early.sendall(protocol.encode_frame(protocol.ExecCommand(argv=["/bin/echo", "old rules"])))
    frames = read_until_eof(early)
    assert frames[0] == protocol.Output(stream="stdout", data=b"old rules\n")
    assert isinstance(frames[-1], RunCompletion) and frames[-1].status == "success"
    frames = read_until_eof(running)
    assert isinstance(frames[-1], RunCompletion) and frames[-1].status == "success", frames
    assert b"".join(f.data for f in frames if isinstance(f, protocol.Output)) == b"finished\n"
    early.close()
    running.close()


@pytest.mark.parametrize(
    ("breakage", "error"),
    [
        (
            lambda text: text.replace("timeout_s = 7.0", "timeout_s = -1.0"),
            'error="profiles.test.timeout_s: must be a positive number, got -1.0"',
        ),
        (
            lambda text: text.replace("[profiles.tight]", "[profiles.tight]\nbogus = 1"),
            'error="profiles.tight: Object contains unknown field `bogus`"',
        ),
        (lambda text: text + "\n[[[", 'error="invalid TOML: '),
        (
            lambda text: text.replace('run_as_user = "nobody"', 'run_as_user = "root"', 1),
            "error=\"profiles.test.run_as_user: run_as_user 'root' resolves to root",
        ),
    ],
    ids=["negative-timeout", "unknown-field", "bad-toml", "root-run-user"],
)
def test_a_bad_policy_is_logged_and_the_old_one_stays(
    own_helper: OwnHelper, breakage: object, error: str
) -> None:
    good = own_helper.policy_path.read_text()
    assert callable(breakage)
    own_helper.write_policy(breakage(_without_echo(good)))
    line = own_helper.reload("policy_reload_failed")
    assert error in line, line
    assert 'keeping="previous policy"' in line
    assert own_helper.alive()
    assert _echo(own_helper) == "success"  # the old policy still allows /bin/echo
    # Fixed, the next reload takes it.
    own_helper.write_policy(_without_echo(good))
    own_helper.reload()
    assert _echo(own_helper) == "refused"


def test_a_missing_policy_file_keeps_the_old_policy(own_helper: OwnHelper) -> None:
    os.unlink(own_helper.policy_path)
    line = own_helper.reload("policy_reload_failed")
    assert "cannot read policy" in line and "No such file or directory" in line
    assert _echo(own_helper) == "success"


def test_settings_of_the_bound_socket_wait_for_a_restart(own_helper: OwnHelper) -> None:
    text = own_helper.policy_path.read_text().replace("socket_mode = 0o666", "socket_mode = 0o600")
    own_helper.write_policy(text)
    own_helper.reload()
    (line,) = own_helper.log_lines("policy_reload_incomplete")
    assert "settings=server.socket_mode until=restart" in line
    assert os.stat(own_helper.socket_path).st_mode & 0o777 == 0o666


def test_signal_storms_and_sigpipe_do_not_kill_the_daemon(own_helper: OwnHelper) -> None:
    for _ in range(20):
        own_helper.process.send_signal(signal.SIGHUP)
    own_helper.process.send_signal(signal.SIGPIPE)
    # The signals coalesce; the last reload reads the file as it is now.
    wait_until(lambda: len(own_helper.log_lines("policy_reloaded")) >= 1, what="a reload")
    assert own_helper.alive()
    assert _echo(own_helper) == "success"
    # A client that hangs up while its output is streaming: EPIPE for the daemon, not death.
    for _ in range(3):
        sock = raw_connect(own_helper.socket_path)
        assert isinstance(read_frame(sock), Greeting)
        loud = protocol.ExecCommand(argv=["/bin/sh", "-c", "while :; do echo xxxxxxxxxx; done"])
        sock.sendall(protocol.encode_frame(loud))
        assert isinstance(read_frame(sock), protocol.Output)
        sock.close()
    assert own_helper.alive()
    # The hung-up runs free their slots once the daemon has noticed and killed them.
    wait_until(lambda: _echo(own_helper) == "success", what="runs of departed clients reaped")
    assert "Traceback" not in own_helper.log()
