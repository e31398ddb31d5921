"""The systemd units: they verify, their hardening score is what the README says, and they
agree with the shipped strict policy and with each other."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from roboz_helper.policy import ServerConfig

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "systemd"
SERVICE = UNITS / "roboz-helper.service"
SOCKET = UNITS / "roboz-helper.socket"
TARGET_EXPOSURE = 4.5

analyze = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(analyze is None, reason="systemd-analyze is not installed")


def _settings(path: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith(("#", "[")):
            key, value = line.split("=", 1)
            found.setdefault(key.strip(), []).append(value.strip())
    return found


@pytest.fixture
def unit_dir(tmp_path: Path) -> Path:
    """The units, with ExecStart pointing at this checkout's real roboz-helper entry point."""
    helper = Path(sys.executable).parent / "roboz-helper"
    assert helper.exists(), "the venv should have the roboz-helper console script"
    shutil.copy(SOCKET, tmp_path / SOCKET.name)
    text = SERVICE.read_text()
    text, count = re.subn(r"^ExecStart=\S+/roboz-helper ", f"ExecStart={helper} ", text, flags=re.M)
    assert count == 1
    (tmp_path / SERVICE.name).write_text(text)
    return tmp_path


@needs_analyze
def test_units_verify_cleanly(unit_dir: Path) -> None:
    assert analyze is not None
    result = subprocess.run(
        [analyze, "verify", "--man=no", SOCKET.name, SERVICE.name],
        cwd=unit_dir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    # verify only warns about unknown or misspelled keys; treat any remark on our units as failure
    remarks = [line for line in result.stderr.splitlines() if "roboz-helper" in line]
    assert remarks == []


@needs_analyze
def test_verify_would_catch_a_broken_unit(unit_dir: Path) -> None:
    assert analyze is not None
    broken = unit_dir / "roboz-broken.service"
    broken.write_text(SERVICE.read_text().replace("/opt/roboz/venv/bin/", "/nonexistent/"))
    result = subprocess.run(
        [analyze, "verify", "--man=no", broken.name],
        cwd=unit_dir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0


@needs_analyze
def test_exposure_meets_target_and_matches_the_readme(unit_dir: Path) -> None:
    assert analyze is not None
    result = subprocess.run(
        [analyze, "security", "--offline=true", "--no-pager", SERVICE.name],
        cwd=unit_dir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    match = re.search(r"Overall exposure level for roboz-helper\.service: (\d+\.\d)", result.stdout)
    assert match, result.stdout + result.stderr
    exposure = float(match[1])
    assert exposure <= TARGET_EXPOSURE
    readme = (UNITS / "README.md").read_text()
    assert (
        f"overall exposure of\n**{exposure}**" in readme or f"exposure of **{exposure}**" in readme
    )


def test_socket_is_group_owned_and_0660() -> None:
    socket = _settings(SOCKET)
    assert socket["SocketMode"] == ["0660"]
    assert socket["SocketGroup"] == ["roboz-helper"]
    assert socket["Accept"] == ["no"]  # one helper process owns the listening socket


def test_service_is_a_notify_service_that_may_create_cgroups() -> None:
    service = _settings(SERVICE)
    assert service["Type"] == ["notify"]
    assert service["Delegate"] == ["yes"]
    assert "roboz-helper.socket" in service["Requires"]
    (exec_start,) = service["ExecStart"]
    assert " serve --policy /etc/roboz-helper/policy.toml" in exec_start
    # systemctl reload is the daemon's SIGHUP policy reload.
    assert service["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    # Namespaces the sandbox needs stay allowed; user namespaces (for runs too) do not.
    allowed = set(service["RestrictNamespaces"][0].split())
    assert allowed == {"cgroup", "ipc", "mnt", "net", "pid", "uts"}
    assert "ProtectControlGroups" not in service


def test_units_agree_with_the_strict_policy_and_snippets() -> None:
    strict = tomllib.loads((ROOT / "policies" / "strict.toml").read_text())
    server = ServerConfig(**strict["server"])
    assert _settings(SOCKET)["ListenStream"] == [server.socket]
    assert server.socket_group == "roboz-helper"
    run_user = strict["profiles"]["locked"]["run_as_user"]
    sysusers = (UNITS / "roboz-helper.sysusers.conf").read_text()
    assert re.search(r"^g roboz-helper ", sysusers, re.M)
    assert re.search(rf"^u {run_user} ", sysusers, re.M)
    tmpfiles = (UNITS / "roboz-helper.tmpfiles.conf").read_text()
    for key in ("scripts_dir", "workdir"):
        assert f"d {strict['profiles']['locked'][key]} " in tmpfiles
    assert "d /run/roboz-helper 0750 root roboz-helper" in tmpfiles


# --- the helper's side of the protocol with systemd (no service manager needed) --------------


def test_listen_fds_are_only_taken_when_meant_for_us(monkeypatch: pytest.MonkeyPatch) -> None:
    from roboz_helper import systemd

    monkeypatch.setenv("LISTEN_FDS", "1")
    monkeypatch.setenv("LISTEN_PID", str(os.getpid() + 1))  # another process's fds
    assert systemd.take_listen_fds() == []
    assert "LISTEN_FDS" not in os.environ  # never passed on, whoever they were for


def test_readiness_reaches_a_path_notify_socket(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from roboz_helper import systemd

    path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as receiver:
        receiver.bind(path)
        receiver.settimeout(10)
        monkeypatch.setenv("NOTIFY_SOCKET", path)
        monkeypatch.setattr(systemd, "_notify_address", None)
        systemd.take_notify_socket()
        assert "NOTIFY_SOCKET" not in os.environ  # runs must not inherit it
        assert systemd.notify("READY=1") is True
        assert receiver.recv(64) == b"READY=1"


def test_notify_without_a_manager_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    from roboz_helper import systemd

    monkeypatch.setattr(systemd, "_notify_address", None)
    assert systemd.notify("READY=1") is False
