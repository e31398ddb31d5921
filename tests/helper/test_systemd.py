"""The systemd units: they verify, their hardening score is what the README says, and they
agree with the shipped strict policy and with each other."""

from __future__ import annotations

import argparse
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

from tests.conftest import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "systemd"
SERVICE = UNITS / "roboz-helper.service"
SOCKET = UNITS / "roboz-helper.socket"
TARGET_EXPOSURE = 4.5


@pytest.fixture
def analyze() -> str:
    """systemd-analyze: skipped where it is missing, but CI must have it."""
    path = shutil.which("systemd-analyze")
    if path is None:
        skip_or_fail("systemd-analyze is not installed")
    assert path is not None
    return path


def _settings(path: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith(("#", "[")):
            key, value = line.split("=", 1)
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def _install_units(*args: str) -> subprocess.CompletedProcess[str]:
    """The command itself, from this checkout's environment (as an operator runs it)."""
    return subprocess.run(
        [sys.executable, "-m", "roboz_helper", "install-units", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def unit_dir(tmp_path: Path) -> Path:
    """The units as `roboz-helper install-units` writes them for this environment."""
    result = _install_units("--prefix", str(tmp_path))
    assert result.returncode == 0, result.stderr
    return tmp_path / "etc" / "systemd" / "system"


def test_units_verify_cleanly(unit_dir: Path, analyze: str) -> None:
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


def test_verify_would_catch_a_broken_unit(unit_dir: Path, analyze: str) -> None:
    broken = unit_dir / "roboz-broken.service"
    installed = (unit_dir / SERVICE.name).read_text()
    broken.write_text(installed.replace("ExecStart=/", "ExecStart=/nonexistent/"))
    result = subprocess.run(
        [analyze, "verify", "--man=no", broken.name],
        cwd=unit_dir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0


def test_exposure_meets_target_and_matches_the_readme(unit_dir: Path, analyze: str) -> None:
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


# --- roboz-helper install-units ---------------------------------------------------------------


def test_install_units_writes_every_file_with_this_environments_exec_start(tmp_path: Path) -> None:
    result = _install_units("--prefix", str(tmp_path))
    assert result.returncode == 0, result.stderr
    expected = {
        "etc/systemd/system/roboz-helper.socket": SOCKET,
        "etc/systemd/system/roboz-helper.service": SERVICE,
        "etc/sysusers.d/roboz-helper.conf": UNITS / "roboz-helper.sysusers.conf",
        "etc/tmpfiles.d/roboz-helper.conf": UNITS / "roboz-helper.tmpfiles.conf",
        "etc/roboz-helper/policy.toml": ROOT / "policies" / "strict.toml",
    }
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == sorted(expected)
    for relative in expected:  # every file it writes, it names
        assert f"wrote     {tmp_path / relative}\n" in result.stdout
    for relative, shipped in expected.items():
        if relative.endswith(".service"):
            continue
        assert (tmp_path / relative).read_text() == shipped.read_text()
        assert (tmp_path / relative).stat().st_mode & 0o777 == 0o644
    service = _settings(tmp_path / "etc/systemd/system/roboz-helper.service")
    helper = Path(sys.executable).parent / "roboz-helper"
    assert service["ExecStart"] == [f"{helper} serve --policy /etc/roboz-helper/policy.toml"]
    # Everything but ExecStart is the shipped unit.
    shipped = _settings(SERVICE)
    del shipped["ExecStart"], service["ExecStart"]
    assert service == shipped


def test_install_units_refuses_to_overwrite_and_never_replaces_a_policy(tmp_path: Path) -> None:
    assert _install_units("--prefix", str(tmp_path)).returncode == 0
    socket_unit = tmp_path / "etc/systemd/system/roboz-helper.socket"
    policy = tmp_path / "etc/roboz-helper/policy.toml"
    socket_unit.write_text(socket_unit.read_text() + "# local edit\n")
    policy.write_text("# the operator's own policy\n")

    refused = _install_units("--prefix", str(tmp_path))
    assert refused.returncode == 1
    assert refused.stderr.startswith("roboz-helper: error: would overwrite ")
    assert str(socket_unit) in refused.stderr and "--force" in refused.stderr
    assert refused.stdout == ""  # nothing written, not even the files that were fine
    assert socket_unit.read_text().endswith("# local edit\n")

    forced = _install_units("--prefix", str(tmp_path), "--force")
    assert forced.returncode == 0, forced.stderr
    assert f"wrote     {socket_unit}\n" in forced.stdout
    assert "unchanged " in forced.stdout
    assert socket_unit.read_text() == SOCKET.read_text()
    assert f"kept      {policy}" in forced.stdout
    assert policy.read_text() == "# the operator's own policy\n"


def test_install_units_takes_the_policy_path_into_exec_start(tmp_path: Path) -> None:
    result = _install_units("--prefix", str(tmp_path), "--policy", "/etc/roboz-helper/ci.toml")
    assert result.returncode == 0, result.stderr
    (exec_start,) = _settings(tmp_path / "etc/systemd/system/roboz-helper.service")["ExecStart"]
    assert exec_start.endswith(" serve --policy /etc/roboz-helper/ci.toml")
    assert (tmp_path / "etc/roboz-helper/ci.toml").exists()
    bad = _install_units("--prefix", str(tmp_path), "--policy", "relative.toml")
    assert bad.returncode == 1 and "--policy must be an absolute path" in bad.stderr


def test_install_units_refuses_an_interpreter_path_a_unit_would_split(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from roboz_helper import install_units

    spaced = tmp_path / "my env" / "bin"
    spaced.mkdir(parents=True)
    (spaced / "roboz-helper").write_text("#!/bin/sh\n")
    (spaced / "roboz-helper").chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(spaced / "python"))
    with pytest.raises(install_units.InstallError, match="cannot be written into a unit"):
        install_units.helper_command()


def test_the_repository_shows_the_files_the_package_installs() -> None:
    # systemd/ and policies/strict.toml are links to the package's own copies: one source.
    package = ROOT / "helper" / "roboz_helper" / "system_files"
    for link in (SOCKET, SERVICE, UNITS / "roboz-helper.sysusers.conf", ROOT / "policies" / "strict.toml"):  # fmt: skip
        assert link.is_symlink() and link.resolve().parent == package


def test_the_guide_installs_only_the_helper_with_commands_that_exist() -> None:
    from roboz_helper.cli import _parser

    guide = (UNITS / "README.md").read_text()
    # The system Python has no RoboZ; the guide uses the installed environment or `roboz`.
    assert "python3 -c" not in guide
    assert "roboz[helper]" not in guide
    assert (
        "sudo ROBOZ_HELPER_REQUIRE_INIT=1 /opt/roboz/venv/bin/pip install './helper[daemon]'"
        in guide
    )
    assert "sudo /opt/roboz/venv/bin/roboz-helper install-units\n" in guide
    assert "sudo systemctl enable --now roboz-helper.socket\n" in guide
    subcommands = next(
        a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)
    ).choices
    # Every command the guide runs (`roboz-helper X`, /opt/roboz/venv/bin/roboz-helper X) exists.
    shown = set(re.findall(r"(?:/bin/|`)roboz-helper ([a-z][a-z-]+)", guide))
    assert {"install-units", "check-policy", "serve"} <= shown <= set(subcommands)


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
