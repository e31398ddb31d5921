"""sandbox-init, the C program that is every run's pid 1: installed with the helper, and a
clear refusal when it is not; what it is started with holds nothing of the helper."""

from __future__ import annotations

import array
import errno
import fcntl
import os
import select
import signal
import socket
import struct
import time
from pathlib import Path

import pytest
from roboz_helper.sandbox import init_wire, support

from tests.procfs import children_named, gone

from .conftest import Sandbox


def test_the_program_is_installed_and_statically_linked() -> None:
    assert init_wire.missing() is None
    elf = Path(init_wire.BINARY).read_bytes()
    assert elf[:4] == b"\x7fELF" and elf[4] == 2  # 64-bit
    phoff = int.from_bytes(elf[0x20:0x28], "little")
    phentsize = int.from_bytes(elf[0x36:0x38], "little")
    phnum = int.from_bytes(elf[0x38:0x3A], "little")
    types = [
        int.from_bytes(elf[phoff + i * phentsize : phoff + i * phentsize + 4], "little")
        for i in range(phnum)
    ]
    # No PT_INTERP (3): no dynamic loader, nothing of a sandbox's /usr is loaded into pid 1.
    assert 3 not in types, "sandbox-init is dynamically linked"


def test_a_missing_program_is_a_clear_refusal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(init_wire, "BINARY", tmp_path / "sandbox-init")
    monkeypatch.setattr(support, "_cached", None)
    ok, why = support.sandbox_support()
    assert not ok
    assert "sandbox-init" in why and "missing" in why and "reinstall" in why
    monkeypatch.setattr(support, "_cached", None)


def test_pid1_is_the_program_with_an_empty_environment(sandbox: Sandbox) -> None:
    """Seen from inside: pid 1 runs sandbox-init (not a Python process), started with no
    arguments beyond its name; its environment is unreadable (not dumpable)."""
    r = sandbox.sh("cat /proc/1/comm; tr '\\0' ' ' < /proc/1/cmdline; echo; cat /proc/1/environ")
    assert r.outcome.status == "failed", r  # cat of /proc/1/environ: permission denied
    lines = r.out.splitlines()
    assert lines[:2] == ["sandbox-init", "sandbox-init "], r
    assert "Permission denied" in r.err, r


def test_the_fork_server_is_restarted_and_dies_with_the_zygote(sandbox: Sandbox) -> None:
    """pid 1 is forked by sandbox-init's fork server, a child of the zygote. A dead server is
    replaced at the next run; a dead zygote takes the server and every pid 1 along."""
    from roboz_helper.sandbox import runner, zygote_client
    from roboz_helper.sandbox import zygote as zygote_module

    if not runner.USE_ZYGOTE:
        pytest.skip("ROBOZ_SANDBOX_ZYGOTE=0: runs fork the helper itself")
    assert sandbox.exec("/bin/true").outcome.status == "success"
    zygote = zygote_client.get().proc
    assert zygote is not None
    (server,) = children_named(zygote.pid, "sandbox-forker")
    warm_before = children_named(server, "sandbox-init")  # a warm pid 1 offered for the next run
    os.kill(server, signal.SIGKILL)
    assert gone(server)
    # They die with their fork server; until one has, the helper could still hand it the
    # next run, which would then end with the pid 1 (a race of this test's making).
    assert all(gone(pid) for pid in warm_before), "a pid 1 outlived its fork server"
    r = sandbox.exec("/bin/echo", "again")
    assert r.outcome.status == "success" and r.out == "again\n", r
    (replacement,) = children_named(zygote.pid, "sandbox-forker")
    assert replacement != server
    inits: list[int] = []
    if zygote_module.POOL:  # the warm pid 1 for the next run, built right after the offer
        deadline = time.monotonic() + 10  # bounds a hang only
        while not inits and time.monotonic() < deadline:
            inits = children_named(replacement, "sandbox-init")
            time.sleep(0.02)
        assert inits, "no warm pid 1 under the new fork server"
    os.kill(zygote.pid, signal.SIGKILL)
    zygote.wait()
    assert gone(replacement), "the fork server outlived the zygote"
    assert all(gone(pid) for pid in inits), "a pid 1 outlived its fork server"
    assert sandbox.exec("/bin/true").outcome.status == "success"  # a new zygote, a new server


def test_malformed_requests_do_not_take_the_fork_server_down(needs_root: None) -> None:
    """The server answers -EINVAL to a request with the wrong descriptors or header and keeps
    serving; a pid 1 forked with a configuration that is not one exits at once."""
    server = init_wire.ForkServer(reset_signals=())
    sock = server._start()
    null = os.open("/dev/null", os.O_RDONLY)
    alive_r, alive_w = os.pipe()
    ours, theirs = socket.socketpair()
    try:
        for head, fds in [
            (b"\x00\x00", [null]),  # too few descriptors
            (b"\x00\x00\x00", [null, null, null]),  # header too long
            (b"\x02\x00", [null, null, null, null, null]),  # report must be 0 or 1
            (b"\x00\x09", [null] * 12),  # too many pooled cgroups
            (b"\x00\x00", []),  # no descriptors at all
        ]:
            sock.sendmsg([head], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            data, ancdata, _, _ = sock.recvmsg(4, socket.CMSG_SPACE(4))
            assert struct.unpack("<i", data) == (-errno.EINVAL,) and not ancdata, head
        pid, pidfd = server.spawn(b"not a configuration", theirs.fileno(), alive_r, -1, ())
        try:
            readable, _, _ = select.select([pidfd], [], [], 10)
            assert readable, "pid 1 did not exit"
        finally:
            os.close(pidfd)
        assert not gone(server.pid, timeout_s=0.1), "the fork server died"
    finally:
        server.stop()
        for fd in (null, alive_r, alive_w):
            os.close(fd)
        ours.close()
        theirs.close()
    assert gone(server.pid), "the fork server outlived its socket"
    os.waitpid(server.pid, 0)


def test_the_shared_configuration_cannot_be_changed(needs_root: None) -> None:
    """pid 1s of one shape share one configuration memfd: it is sealed, so nothing that holds
    it can write, grow or shrink it, or unseal it."""
    memfd = init_wire._config_fd(b"RZI2 configuration")
    try:
        with pytest.raises(PermissionError):
            os.write(memfd, b"evil")
        with pytest.raises(PermissionError):
            os.pwrite(memfd, b"evil", 0)
        with pytest.raises(PermissionError):
            os.ftruncate(memfd, 0)
        with pytest.raises(PermissionError):
            os.ftruncate(memfd, 1 << 20)
        with pytest.raises(PermissionError):
            fcntl.fcntl(memfd, fcntl.F_ADD_SEALS, 0)  # F_SEAL_SEAL: no seal can be removed
        assert os.pread(memfd, 64, 0) == b"RZI2 configuration"
    finally:
        os.close(memfd)
