"""The real helper daemon on a real Unix socket: protocol round trips, authorization, refusals,
hostile input, limits, and that runs leave nothing behind.

Every test that sends something hostile ends by checking that a fresh client is still served.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import msgspec
import pytest
from roboz_helper import protocol
from roboz_helper.protocol import Greeting, ProtocolError, RunCompletion, ScriptEntry

from roboz.shed.safe_scripts import (
    ClientRefused,
    HelperBusy,
    HelperUnavailable,
    ProtocolMismatch,
    SafeScriptsClient,
)
from tests.helper_daemon import serve_command, wait_for_socket

from .conftest import (
    CLIENT_GROUP,
    HANDSHAKE_TIMEOUT_S,
    MAX_CONNECTIONS,
    MAX_RUNS_PER_CLIENT,
    NOBODY,
    HelperDaemon,
    as_user,
    own_daemon_files,
    processes_with,
    wait_until,
)
from .wire import greeted, raw_connect, read_frame, read_until_eof

pytestmark = pytest.mark.root


def assert_still_serving(helper: HelperDaemon) -> None:
    greeting = SafeScriptsClient(helper.socket_path).check()
    assert greeting.profile == "test"


# --- greeting and listing (no run needed) ---------------------------------------------------


def test_greeting_reports_version_and_limits(helper: HelperDaemon) -> None:
    greeting = SafeScriptsClient(helper.socket_path).check()
    assert greeting.protocol_version == protocol.PROTOCOL_VERSION
    assert greeting.profile == "test"
    assert greeting.uid == 0
    assert greeting.limits.max_runs == MAX_RUNS_PER_CLIENT
    assert greeting.limits.timeout_s == 60.0
    assert greeting.limits.network == "none"


def test_list_scripts_round_trip(helper: HelperDaemon) -> None:
    scripts = SafeScriptsClient(helper.socket_path).list_scripts()
    listed = {s.name: s.description for s in scripts}
    assert listed == {
        "fail.sh": "Exit with the status given.",
        "hello.sh": "Say hello to the arguments.",
        "lots.sh": "Print many numbered lines.",
        "nocomment.sh": "",
        "selfkill.sh": "Kill itself with a signal.",
        "sleeper.sh": "Sleep in three processes until killed.",
        "sub/nested.sh": "A script in a subdirectory.",
    }  # no symlinks, FIFOs, hidden or non-executable files
    assert [s.name for s in scripts] == sorted(listed)


def test_list_scripts_wire_format(helper: HelperDaemon) -> None:
    sock = greeted(helper.socket_path)
    sock.sendall(protocol.encode_frame(protocol.ListScripts()))
    frames = read_until_eof(sock)
    assert all(isinstance(f, ScriptEntry) for f in frames[:-1])
    assert frames[-1] == RunCompletion(status="listed", diagnostic=f"{len(frames) - 1} scripts")


# --- authorization --------------------------------------------------------------------------


def test_unknown_client_is_refused(helper: HelperDaemon) -> None:
    def first_frame() -> str:
        with raw_connect(helper.socket_path) as sock:
            return repr(read_frame(sock))

    frame = as_user(NOBODY, NOBODY, first_frame)
    assert frame.startswith("RunCompletion(status='refused'")
    assert f"uid {NOBODY} (gid {NOBODY}) is not authorized" in frame
    assert_still_serving(helper)


def test_supplementary_groups_authorize(helper: HelperDaemon) -> None:
    def profile() -> str:
        try:
            return SafeScriptsClient(helper.socket_path).check().profile
        except ClientRefused as exc:
            return f"refused: {exc}"

    # uid/gid 5000 is in no rule; membership of CLIENT_GROUP (supplementary only) is.
    assert as_user(5000, 5000, profile, groups=(CLIENT_GROUP,)) == "tight"
    assert as_user(5000, 5000, profile).startswith("refused: uid 5000 (gid 5000)")


def test_client_library_reports_refusal(helper: HelperDaemon) -> None:
    def use_library() -> str:
        client = SafeScriptsClient(helper.socket_path)
        try:
            client.check()
            return "check passed"
        except ClientRefused as exc:
            checked = f"refused: {exc}"
        return f"{checked}|run: {client.run_script('hello.sh').status}"

    checked, run = as_user(NOBODY, NOBODY, use_library).split("|")
    assert checked.startswith(f"refused: uid {NOBODY}")
    assert run == "run: refused"


def test_missing_socket_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(HelperUnavailable, match="no helper socket"):
        SafeScriptsClient(str(tmp_path / "none.sock")).check()


def test_wrong_protocol_version_is_detected(tmp_path: Path) -> None:
    # A fake peer is fine here: this checks the client's reaction, not the helper.
    path = str(tmp_path / "fake.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
        server.listen(1)
        pid = os.fork()
        if pid == 0:
            try:
                conn, _ = server.accept()
                greeting = msgspec.msgpack.encode(
                    {
                        "type": "greeting",
                        "protocol_version": 99,
                        "helper_version": "x",
                        "profile": "p",
                        "uid": 0,
                        "limits": {
                            "timeout_s": 1.0,
                            "max_output_bytes": 1,
                            "pids_max": 1,
                            "memory_max_bytes": 1,
                            "cpu_time_s": 1,
                            "max_file_bytes": 1,
                            "tmp_size_bytes": 1,
                            "nofile_max": 1,
                            "network": "none",
                            "max_runs": 1,
                        },
                    }
                )
                conn.sendall(len(greeting).to_bytes(4, "big") + greeting)
                conn.close()
            finally:
                os._exit(0)
        try:
            with pytest.raises(ProtocolMismatch, match="protocol 99"):
                SafeScriptsClient(path).check()
        finally:
            os.waitpid(pid, 0)


# --- refused requests (checked before anything runs) ---------------------------------------


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../hello.sh", "may not contain '..'"),
        ("sub/../hello.sh", "may not contain '..'"),
        ("./hello.sh", "may not contain '..'"),
        ("sub//nested.sh", "may not contain '..'"),
        ("/etc/passwd", "must be relative"),
        ("hello.sh\0evil", "NUL byte"),
        ("link.sh", "symlink"),
        ("escape.sh", "symlink"),
        ("linkdir/nested.sh", "symlink"),
        ("notexec.sh", "not executable"),
        ("pipe.sh", "not a regular file"),
        ("sub", "not a regular file"),
        ("missing.sh", "no such script"),
        ("", "empty script path"),
    ],
)
def test_bad_script_paths_are_refused(helper: HelperDaemon, path: str, reason: str) -> None:
    output: list[tuple[str, bytes]] = []
    result = SafeScriptsClient(helper.socket_path).run_script(
        path, on_output=lambda s, d: output.append((s, d))
    )
    assert result.status == "refused"
    assert reason in result.diagnostic
    assert output == []
    assert result.exit_code is None


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["/bin/cat", "/etc/shadow"], "not allowed"),
        (["echo", "x"], "not allowed"),  # no PATH lookup
        (["/bin/../bin/echo", "x"], "not allowed"),  # exact match only
        (["/bin/echo", "a\0b"], "NUL"),
        ([], "empty argv"),
    ],
)
def test_exec_outside_the_allowlist_is_refused(
    helper: HelperDaemon, argv: list[str], reason: str
) -> None:
    result = SafeScriptsClient(helper.socket_path).exec_command(argv)
    assert result.status == "refused"
    assert reason in result.diagnostic


def test_nul_in_script_arguments_is_refused(helper: HelperDaemon) -> None:
    result = SafeScriptsClient(helper.socket_path).run_script("hello.sh", ["ok", "b\0d"])
    assert result.status == "refused"
    assert "NUL" in result.diagnostic


# --- hostile bytes: each ends only its own connection ---------------------------------------


def _error_then_eof(sock: socket.socket) -> str:
    frames = read_until_eof(sock)
    assert len(frames) == 1, frames
    assert isinstance(frames[0], ProtocolError)
    return frames[0].message


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ((protocol.MAX_FRAME_BYTES + 1).to_bytes(4, "big"), "exceeds the limit"),
        (b"\xff\xff\xff\xff" + b"x" * 100, "exceeds the limit"),
        (b"\x00\x00\x00\x00", "empty frame"),
        (b"\x00\x00\x00\x05\xc1\xc1\xc1\xc1\xc1", "malformed request"),
        (b"\x00\x00\x00\x03\x93\x01\x02", "invalid request"),
        (
            protocol.HEADER.pack(
                len(
                    body := msgspec.msgpack.encode(
                        {"type": "run_script", "path": "hello.sh", "args": [], "sudo": True}
                    )
                )
            )
            + body,
            "unknown field `sudo`",
        ),
        (
            protocol.HEADER.pack(
                len(body2 := msgspec.msgpack.encode({"type": "exec_command", "argv": [1, 2]}))
            )
            + body2,
            "Expected `str`, got `int`",
        ),
    ],
    ids=["over-limit", "huge", "zero", "garbage", "wrong-shape", "unknown-field", "wrong-type"],
)
def test_malformed_frames_end_the_connection(
    helper: HelperDaemon, payload: bytes, message: str
) -> None:
    sock = greeted(helper.socket_path)
    sock.sendall(payload)
    assert message in _error_then_eof(sock)
    sock.close()
    assert_still_serving(helper)


def test_random_bytes_end_the_connection(helper: HelperDaemon) -> None:
    rng = random.Random(20261130)
    for _ in range(20):
        sock = greeted(helper.socket_path)
        # The helper may already have hung up after an early error.
        with contextlib.suppress(BrokenPipeError):
            sock.sendall(rng.randbytes(rng.randint(1, 4096)))
        frames = read_until_eof(sock)
        # Either an error frame, or nothing decodable arrived within the handshake deadline.
        assert len(frames) == 1 and isinstance(frames[0], ProtocolError), frames
        sock.close()
    assert_still_serving(helper)


def test_a_silent_client_is_dropped(helper: HelperDaemon) -> None:
    sock = greeted(helper.socket_path)
    assert f"no request within {HANDSHAKE_TIMEOUT_S:g}s" in _error_then_eof(sock)
    sock.close()
    assert_still_serving(helper)


def test_a_half_sent_frame_is_dropped(helper: HelperDaemon) -> None:
    sock = greeted(helper.socket_path)
    sock.sendall(b"\x00\x00\x01\x00" + b"\x80" * 10)  # announces 256 bytes, sends 10
    assert "no request within" in _error_then_eof(sock)
    sock.close()
    assert_still_serving(helper)


def test_a_client_that_hangs_up_mid_frame_does_not_hurt(helper: HelperDaemon) -> None:
    for payload in (b"", b"\x00", b"\x00\x00\x00\x10abc"):
        sock = raw_connect(helper.socket_path)
        sock.sendall(payload)
        sock.close()
    assert_still_serving(helper)


def test_connections_beyond_the_limit_get_busy(helper: HelperDaemon) -> None:
    def served() -> bool:
        try:
            SafeScriptsClient(helper.socket_path).check()
        except HelperBusy:
            return False
        return True

    # Earlier tests may leave connections the daemon has not dropped yet (a silent client
    # waits out the handshake deadline), so the exact count is taken on an idle daemon: an
    # attempt that finds fewer free slots is closed, and the next one waits until every
    # connection the daemon could still hold has passed its handshake deadline.
    for attempt in range(5):
        if attempt:
            time.sleep(HANDSHAKE_TIMEOUT_S + 1.0)
        socks = [raw_connect(helper.socket_path) for _ in range(200)]
        try:
            first = [read_frame(s) for s in socks]
            greetings = [f for f in first if isinstance(f, Greeting)]
            busy = [f for f in first if isinstance(f, RunCompletion) and f.status == "busy"]
            assert len(greetings) + len(busy) == 200
            assert all("connection limit" in b.diagnostic for b in busy)
            if len(greetings) < MAX_CONNECTIONS:
                continue
            assert len(greetings) == MAX_CONNECTIONS
            # A busy connection is closed right after its completion: a clean refusal.
            for sock, frame in zip(socks, first, strict=True):
                if isinstance(frame, RunCompletion):
                    assert read_frame(sock) is None
            with pytest.raises(HelperBusy):
                SafeScriptsClient(helper.socket_path).check()
            break
        finally:
            for sock in socks:
                sock.close()
            wait_until(served, what="slots freed after the clients hung up")
    else:
        pytest.fail(f"the daemon never had all {MAX_CONNECTIONS} connection slots free")


# --- runs (these go through the sandbox) ----------------------------------------------------


def test_run_script_round_trip(helper: HelperDaemon) -> None:
    marker = uuid.uuid4().hex
    result = SafeScriptsClient(helper.socket_path).run_script("hello.sh", ["a b", marker])
    assert result.status == "success", result
    assert result.exit_code == 0
    assert result.signal is None
    assert result.stdout == f"hello a b {marker}\n{NOBODY}\n"
    assert result.stderr == ""
    assert result.limit is None
    assert result.wall_time_s > 0
    # One log line per run: client uid, profile, what ran, status, duration.
    assert helper.log_path is not None
    lines = [line for line in helper.log_path.read_text().splitlines() if marker in line]
    assert len(lines) == 1
    assert " run uid=0 " in lines[0]
    assert "profile=test run=" in lines[0]
    assert f"kind=script argv=\"hello.sh 'a b' {marker}\" status=success exit=0" in lines[0]
    assert "duration=" in lines[0]


def test_nested_script_runs(helper: HelperDaemon) -> None:
    result = SafeScriptsClient(helper.socket_path).run_script("sub/nested.sh")
    assert (result.status, result.stdout) == ("success", "nested\n")


def test_exec_command_round_trip(helper: HelperDaemon) -> None:
    result = SafeScriptsClient(helper.socket_path).exec_command(["/bin/echo", "hi", "there"])
    assert result.status == "success", result
    assert result.stdout == "hi there\n"


def test_failure_keeps_stdout_and_stderr_apart(helper: HelperDaemon) -> None:
    result = SafeScriptsClient(helper.socket_path).run_script("fail.sh", ["3"])
    assert result.status == "failed"
    assert result.exit_code == 3
    assert result.exit_status == 3
    assert (result.stdout, result.stderr) == ("", "oops\n")


def test_a_lot_of_output_streams_in_order(helper: HelperDaemon) -> None:
    n = 30000
    chunks: list[tuple[str, bytes]] = []
    result = SafeScriptsClient(helper.socket_path).run_script(
        "lots.sh", [str(n)], on_output=lambda s, d: chunks.append((s, d))
    )
    assert result.status == "success", result
    expected_out = "".join(f"line {i}\n" for i in range(1, n + 1))
    expected_err = "".join(f"err {i}\n" for i in range(1000, n + 1, 1000))
    assert result.stdout == expected_out
    assert result.stderr == expected_err
    streamed_out = b"".join(d for s, d in chunks if s == "stdout").decode()
    assert streamed_out == expected_out
    assert len([c for c in chunks if c[0] == "stdout"]) > 1  # streamed, not one final blob


def test_per_client_run_limit(helper: HelperDaemon) -> None:
    marker = f"roboz-limit-{uuid.uuid4().hex}"
    running = []
    try:
        for _ in range(MAX_RUNS_PER_CLIENT):
            sock = greeted(helper.socket_path)
            sock.sendall(
                protocol.encode_frame(protocol.RunScript(path="sleeper.sh", args=[marker]))
            )
            frame = read_frame(sock)
            assert isinstance(frame, protocol.Output) and frame.data == b"ready\n", frame
            running.append(sock)
        result = SafeScriptsClient(helper.socket_path).run_script("hello.sh")
        assert result.status == "busy"
        assert "runs in progress" in result.diagnostic
    finally:
        for sock in running:
            sock.close()  # hanging up cancels the run
    wait_until(lambda: not processes_with(marker), what="runs of closed clients gone")
    assert SafeScriptsClient(helper.socket_path).run_script("hello.sh").status == "success"


def test_a_killed_client_leaves_no_process_behind(helper: HelperDaemon) -> None:
    marker = f"roboz-killed-{uuid.uuid4().hex}"
    code = textwrap.dedent(
        f"""
        import sys
        from roboz.shed.safe_scripts import SafeScriptsClient
        def show(stream, data):
            sys.stdout.write(data.decode()); sys.stdout.flush()
        SafeScriptsClient({helper.socket_path!r}).run_script(
            "sleeper.sh", [{marker!r}], on_output=show)
        """
    )
    client = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert client.stdout is not None
        assert client.stdout.readline() == b"ready\n"
        # The run really is up: its shell and both sleepers (one in a new session) carry
        # the marker. Without this the check below could pass vacuously.
        wait_until(lambda: len(processes_with(marker)) >= 3, what="the run's processes")
        client.kill()
        client.wait(timeout=30)
        wait_until(lambda: not processes_with(marker), what="every process of the run killed")
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    assert_still_serving(helper)


# --- shutdown and systemd integration (each with its own daemon) ----------------------------


def test_sigterm_kills_runs_and_removes_the_socket(needs_root: None) -> None:
    base, socket_path, policy = own_daemon_files("roboz-helper-sigterm-", socket_mode=0o660)
    daemon = subprocess.Popen(serve_command(policy, socket_path), stderr=subprocess.PIPE)
    marker = f"roboz-term-{uuid.uuid4().hex}"
    try:
        wait_for_socket(socket_path, proc=daemon)
        assert os.stat(socket_path).st_mode & 0o777 == 0o660
        sock = greeted(socket_path)
        sock.sendall(protocol.encode_frame(protocol.RunScript(path="sleeper.sh", args=[marker])))
        assert read_frame(sock) == protocol.Output(stream="stdout", data=b"ready\n")
        wait_until(lambda: len(processes_with(marker)) >= 3, what="the run's processes")

        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=60) == 0
        last = read_until_eof(sock)
        assert last == [RunCompletion(status="killed", diagnostic="the helper is shutting down")]
        assert processes_with(marker) == []
        assert not os.path.exists(socket_path)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        assert daemon.stderr is not None
        log = daemon.stderr.read().decode()
        shutil.rmtree(base, ignore_errors=True)
    assert "roboz-helper stopped" in log
    assert f'kind=script argv="sleeper.sh {marker}" status=killed' in log


def test_refuses_to_replace_a_live_socket(helper: HelperDaemon) -> None:
    result = subprocess.run(
        serve_command(helper.policy_path, helper.socket_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "in use by a running helper" in result.stderr
    assert_still_serving(helper)


def test_socket_activation_and_readiness(needs_root: None) -> None:
    base, socket_path, policy = own_daemon_files("roboz-helper-activation-")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(16)
    notify_name = f"roboz-test-notify-{uuid.uuid4().hex}"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind("\0" + notify_name)
    notify.settimeout(60)
    listen_fd = listener.fileno()

    def fd3_is_the_listener() -> None:  # runs in the child between fork and exec
        os.dup2(listen_fd, 3)

    # LISTEN_PID must be the helper's own pid: the shell sets it to $$, then execs the helper
    # (same pid). --socket names a path that does not exist: an activated helper ignores it.
    argv = [
        "/bin/sh",
        "-c",
        'LISTEN_PID=$$ exec "$@"',
        "sh",
        *serve_command(policy, str(base / "unused.sock")),
    ]
    env = {**os.environ, "NOTIFY_SOCKET": "@" + notify_name, "LISTEN_FDS": "1"}
    daemon = subprocess.Popen(
        argv,
        env=env,
        pass_fds=(3,) if listen_fd != 3 else (),
        preexec_fn=fd3_is_the_listener,
        stderr=subprocess.DEVNULL,
    )
    try:
        ready = notify.recv(256).split(b"\n")
        assert ready[0] == b"READY=1" and ready[1].startswith(b"STATUS=serving on "), ready
        greeting = SafeScriptsClient(socket_path).check()
        assert greeting.profile == "test"
        assert not (base / "unused.sock").exists()
        daemon.send_signal(signal.SIGTERM)
        assert notify.recv(256) == b"STOPPING=1"
        assert daemon.wait(timeout=60) == 0
        # The activation socket belongs to systemd: the helper must not unlink it.
        assert os.path.exists(socket_path)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        listener.close()
        notify.close()
        shutil.rmtree(base, ignore_errors=True)


def test_the_socket_accepts_connections_from_the_moment_it_exists(tmp_path: Path) -> None:
    """A client that connects as soon as the socket file appears (a script waiting for it) is
    queued until the helper serves, never refused while the helper is still starting."""
    from roboz_helper.listening import open_listening_socket
    from roboz_helper.policy import ServerConfig

    path = str(tmp_path / "h.sock")
    listening = open_listening_socket(path, ServerConfig(socket=path, socket_mode=0o600))
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(path)  # nothing serves yet: ECONNREFUSED before listening at bind
    finally:
        listening.sock.close()
        listening.remove()
