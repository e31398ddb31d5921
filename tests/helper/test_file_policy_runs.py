"""Issue 25 end to end: a real daemon on a real socket, the agent's PermissionPolicy sent with
each run, the profile's own file_policy, and fail-closed versioning.

The agent is denied ``secrets/**`` by its guarded file tools; a SafeScripts run of the same
agent must not read it either, by any path, and neither may a client that sends no policy
(or a wider one) where the operator's profile denies it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from roboz_helper import protocol
from roboz_helper.file_policy import FilePolicy, FileRule

from roboz.shed.models import ActionVerdict, Operation, PermissionRule
from roboz.shed.safe_scripts import SafeScriptsClient
from roboz.shed.safe_scripts.client import ProtocolMismatch
from roboz.shed.sandbox import PermissionPolicy
from tests.helper.conftest import NOBODY, own_daemon_files, wait_until
from tests.helper.wire import greeted, read_until_eof
from tests.helper_daemon import serve_command, wait_for_socket

SECRET = "s3cr3t-api-key"
PRIVATE = "operator-only"


@dataclass
class Daemon:
    base: Path
    work: Path
    socket_path: str


def _tree(work: Path) -> None:
    for rel, text in {
        "secrets/api.key": SECRET,
        "private/ops.txt": PRIVATE,
        "src/main.py": "print('hi')\n",
    }.items():
        path = work / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for path in [work, *work.rglob("*")]:
        os.chown(path, NOBODY, NOBODY)


@pytest.fixture
def daemon(needs_root: None) -> Iterator[Daemon]:
    base, socket_path, policy = own_daemon_files("roboz-helper-fp-")
    work = base / "work"
    _tree(work)
    operator = base / "operator-files.toml"
    operator.write_text(f'base = "{work}"\ndefault = "allow"\n[[deny]]\npattern = "private/**"\n')
    text = policy.read_text().replace(
        "[profiles.test]\n", f'[profiles.test]\nfile_policy = "{operator}"\n'
    )
    policy.write_text(text)
    log_path = base / "helper.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            serve_command(policy, socket_path), stdout=log, stderr=subprocess.STDOUT
        )
    try:
        wait_for_socket(socket_path, proc=process)
        wait_until(lambda: b"roboz-helper ready on" in log_path.read_bytes(), what="ready")
        yield Daemon(base, work, socket_path)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(base, ignore_errors=True)


def _agent_policy(work: Path) -> PermissionPolicy:
    return PermissionPolicy(
        base=work,
        default_verdict=ActionVerdict.deny,
        allow=(PermissionRule(pattern="**"),),
        deny=(PermissionRule(pattern="secrets/**"),),
    )


READ_ALL = (
    "cat secrets/api.key; /usr/bin/wc -c secrets/api.key; cat {w}/secrets/api.key; "
    "grep -r s3cr3t .; find . -type f -exec cat {{}} +; cat /proc/self/root{w}/secrets/api.key;"
    " cat /proc/self/cwd/secrets/api.key; ls -la secrets; cat private/ops.txt; cat src/main.py"
)


def test_the_issue_the_denied_file_is_denied_by_both_tools(daemon: Daemon) -> None:
    work = daemon.work
    policy = _agent_policy(work)
    # The one place that answers "may this agent read X?" for both tools.
    assert policy.verdict("secrets/api.key", Operation.READ) is ActionVerdict.deny
    client = SafeScriptsClient(daemon.socket_path, file_policy=policy)
    result = client.exec_command(["/bin/sh", "-c", READ_ALL.format(w=work)])
    assert SECRET not in result.stdout and SECRET not in result.stderr, result
    assert PRIVATE not in result.stdout, result  # the operator's policy applies as well
    assert "print('hi')" in result.stdout, result  # and what is allowed still works
    # A kept connection carries the policy too (each request carries it).
    again = client.exec_command(["/bin/sh", "-c", "cat secrets/api.key"])
    assert SECRET not in again.stdout
    client.close()
    assert (work / "secrets" / "api.key").read_text() == SECRET


def test_the_operator_policy_holds_without_or_against_the_client(daemon: Daemon) -> None:
    command = ["/bin/sh", "-c", "cat private/ops.txt; cat secrets/api.key"]
    plain = SafeScriptsClient(daemon.socket_path, reuse_connections=False)
    result = plain.exec_command(command)
    assert PRIVATE not in result.stdout and SECRET in result.stdout, result
    wide = FilePolicy(base=str(daemon.work), default="allow", allow=(FileRule(pattern="**"),))
    widening = SafeScriptsClient(daemon.socket_path, file_policy=wide, reuse_connections=False)
    result = widening.exec_command(command)
    assert PRIVATE not in result.stdout, result


def test_a_malformed_restriction_is_refused_naming_the_field(daemon: Daemon) -> None:
    bad = FilePolicy(base=str(daemon.work), deny=(FileRule(pattern="**a"),))
    sock = greeted(daemon.socket_path)
    sock.sendall(protocol.encode_frame(protocol.ExecCommand(argv=["/bin/sh"], file_policy=bad)))
    frames = read_until_eof(sock)
    completion = frames[-1]
    assert isinstance(completion, protocol.RunCompletion)
    assert completion.status == "refused"
    assert "file_policy.deny[0].pattern" in completion.diagnostic


class _OldHelper:
    """A helper that speaks protocol 1: it greets with version 1, and (like the real one of
    that version, which decodes strictly) it records whatever request arrives."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.requests: list[bytes] = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(4)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                limits = protocol.Limits(
                    timeout_s=5.0, max_output_bytes=1000, pids_max=8, memory_max_bytes=1 << 24,
                    cpu_time_s=5, max_file_bytes=1000, tmp_size_bytes=1 << 20, nofile_max=64,
                    network="none", max_runs=1,
                )  # fmt: skip
                greeting = protocol.Greeting(
                    protocol_version=1, helper_version="old", profile="p", uid=0, limits=limits
                )
                conn.sendall(protocol.encode_frame(greeting))
                conn.settimeout(2.0)
                try:
                    data = conn.recv(65536)
                except OSError:
                    data = b""
                if data:
                    self.requests.append(data)
                    conn.sendall(protocol.encode_frame(protocol.RunCompletion(status="success")))

    def close(self) -> None:
        self.server.close()


def test_a_helper_that_cannot_apply_a_restriction_gets_no_run(tmp_path: Path) -> None:
    old = _OldHelper(str(tmp_path / "old.sock"))
    try:
        policy = _agent_policy(tmp_path)
        client = SafeScriptsClient(old.path, file_policy=policy, reuse_connections=False)
        with pytest.raises(ProtocolMismatch, match="cannot narrow a run by a file policy"):
            client.exec_command(["/bin/cat", "secrets/api.key"])
        assert old.requests == []  # nothing was sent, so nothing ran
        # Without a restriction the old helper is still usable.
        unrestricted = SafeScriptsClient(old.path, reuse_connections=False)
        assert unrestricted.exec_command(["/bin/true"]).status == "success"
        assert len(old.requests) == 1
    finally:
        old.close()


def test_a_version_1_request_decoder_refuses_the_restriction() -> None:
    # What a protocol-1 helper does with a request that carries a file policy: its Structs
    # forbid unknown fields, so the request is a protocol error and nothing runs.
    import msgspec

    class OldExec(msgspec.Struct, tag="exec_command", tag_field="type",
                  forbid_unknown_fields=True, frozen=True, kw_only=True):  # fmt: skip
        argv: list[str]
        trace_id: str | None = None
        keep_open: bool = False

    body = protocol.encode_frame(
        protocol.ExecCommand(argv=["/bin/cat"], file_policy=FilePolicy(base="/srv"))
    )[protocol.HEADER.size :]
    with pytest.raises(msgspec.ValidationError, match="unknown field `file_policy`"):
        msgspec.msgpack.decode(body, type=OldExec)


def _check_policy(policy: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "roboz_helper", "check-policy", str(policy)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_check_policy_shows_the_profiles_file_policy_and_names_bad_fields(
    needs_root: None,
) -> None:
    base, _, policy = own_daemon_files("roboz-helper-fpcheck-")
    try:
        files = base / "files.toml"
        files.write_text(f'base = "{base}/work"\n[[deny]]\npattern = "secrets/**"\n')
        policy.write_text(
            policy.read_text().replace(
                "[profiles.test]\n", f'[profiles.test]\nfile_policy = "{files}"\n'
            )
        )
        ok = _check_policy(policy)
        assert ok.returncode == 0, ok.stderr
        assert f"profiles.test.file_policy: {files}" in ok.stdout
        assert "deny: secrets/** (create,delete,read)" in ok.stdout
        files.write_text(f'base = "{base}/work"\n[[ask]]\npattern = "**a"\n')
        bad = _check_policy(policy)
        assert bad.returncode == 2
        assert f"profiles.test.file_policy: {files}: ask[0].pattern:" in bad.stderr
        assert "Traceback" not in bad.stderr
    finally:
        shutil.rmtree(base, ignore_errors=True)
