"""A policy's paths against the host: check-policy, start-up, reloads and every run apply the
same rules, and a path that goes missing while the daemon runs is a refusal that names it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from roboz_helper import host_paths, scripts
from roboz_helper.policy import parse_policy

from roboz.shed.safe_scripts import ClientRefused, SafeScriptsClient
from tests.helper_daemon import serve_command

from .conftest import NOBODY, OwnHelper, build_tree, make_base, policy_text


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "roboz_helper", *args], capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for name in ("scripts", "work", "ref", "out"):
        (tmp_path / name).mkdir(mode=0o755)
        (tmp_path / name).chmod(0o755)
    return tmp_path


def _policy(base: Path, **overrides: str) -> str:
    fields = {
        "scripts_dir": f'"{base}/scripts"',
        "workdir": f'"{base}/work"',
        "readonly_paths": f'["{base}/ref"]',
        "writable_paths": f'["{base}/out"]',
        "commands": '["/bin/sh"]',
        **overrides,
    }
    profile = "".join(f"{k} = {v}\n" for k, v in fields.items())
    return f'[[clients]]\nuid = 0\nprofile = "p"\n[profiles.p]\nrun_as_user = "nobody"\n{profile}'


def _problems(base: Path, **overrides: str) -> list[str]:
    return [str(p) for p in host_paths.policy_problems(parse_policy(_policy(base, **overrides)))]


def test_a_policy_whose_paths_exist_has_no_problems(tree: Path) -> None:
    assert _problems(tree) == []


def test_every_kind_of_path_problem_names_its_field(tree: Path) -> None:
    (tree / "file").write_text("x")
    (tree / "link").symlink_to(tree / "work")
    (tree / "noexec").write_text("#!/bin/sh\n")
    cases = {
        "scripts_dir": (f'"{tree}/gone"', f"profiles.p.scripts_dir: {tree}/gone: does not exist"),
        "workdir": (f'"{tree}/file"', f"profiles.p.workdir: {tree}/file: is not a directory"),
        "readonly_paths": (
            f'["{tree}/ref", "{tree}/gone"]',
            f"profiles.p.readonly_paths[1]: {tree}/gone: does not exist",
        ),
        "writable_paths": (
            f'["{tree}/link"]',
            f"profiles.p.writable_paths[0]: {tree}/link: goes through a symlink (resolves to "
            f"{tree}/work); policy paths must be symlink-free",
        ),
        "commands": (
            f'["/bin/sh", "{tree}/noexec", "{tree}/work", "/no/such/tool"]',
            f"profiles.p.commands[1]: {tree}/noexec: is not executable",
        ),
    }
    for field, (value, expected) in cases.items():
        found = _problems(tree, **{field: value})
        assert expected in found, (field, found)
    assert _problems(tree, commands=f'["{tree}/work"]') == [
        f"profiles.p.commands[0]: {tree}/work: is not a regular file"
    ]
    assert _problems(tree, workdir=f'"{tree}/link"') == [
        f"profiles.p.workdir: {tree}/link: goes through a symlink (resolves to {tree}/work); "
        "policy paths must be symlink-free"
    ]
    assert _problems(tree, scripts_dir=f'"{tree}/file/x"') == [
        f"profiles.p.scripts_dir: {tree}/file/x: does not exist "
        "(a component of the path is not a directory)"
    ]


@pytest.mark.root
def test_a_scripts_dir_others_can_change_is_refused(tree: Path, needs_root: None) -> None:
    (tree / "scripts").chmod(0o775)
    assert _problems(tree) == [
        f"profiles.p.scripts_dir: {tree}/scripts: is writable by group or others (mode 0o775); "
        "only its owner may write it"
    ]
    (tree / "scripts").chmod(0o755)
    os.chown(tree / "scripts", NOBODY, NOBODY)
    assert _problems(tree) == [
        f"profiles.p.scripts_dir: {tree}/scripts: is owned by uid {NOBODY}; only root (or the "
        "helper's own user) may own it"
    ]


def test_check_policy_prints_every_problem_and_exits_2(tree: Path) -> None:
    policy = tree / "policy.toml"
    policy.write_text(_policy(tree, scripts_dir=f'"{tree}/gone"', workdir=f'"{tree}/gone2"'))
    result = _cli("check-policy", str(policy))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"roboz-helper: error: {policy}: profiles.p.scripts_dir: {tree}/gone: does not exist",
        f"roboz-helper: error: {policy}: profiles.p.workdir: {tree}/gone2: does not exist",
    ]


def test_serve_refuses_to_start_on_a_policy_the_host_cannot_provide(tree: Path) -> None:
    policy = tree / "policy.toml"
    policy.write_text(_policy(tree, workdir=f'"{tree}/gone"'))
    sock = tree / "helper.sock"
    result = subprocess.run(
        serve_command(policy, str(sock)), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert result.stderr == (
        f"roboz-helper: error: {policy}: profiles.p.workdir: {tree}/gone: does not exist\n"
    )
    assert not sock.exists()


# --- at run time, against a real daemon ----------------------------------------------------


@pytest.mark.root
def test_a_directory_removed_while_serving_is_a_refusal_that_names_it(
    own_helper: OwnHelper,
) -> None:
    client = SafeScriptsClient(own_helper.socket_path)
    assert client.run_script("hello.sh").status == "success"
    work = own_helper.base / "work"
    shutil.rmtree(work)
    for result in (client.run_script("hello.sh"), client.exec_command(["/bin/echo", "x"])):
        assert result.status == "refused"
        assert result.diagnostic == (
            f"this profile cannot run on this host: profiles.test.workdir: {work}: does not "
            "exist (the helper's administrator can run `roboz-helper check-policy` on its policy)"
        )
    assert len(client.list_scripts()) > 0  # listing needs only the scripts directory

    shutil.rmtree(own_helper.base / "scripts")
    with pytest.raises(ClientRefused, match=r"profiles\.test\.scripts_dir: .*: does not exist"):
        client.list_scripts()
    # The terminal client maps the refusal to its documented exit code.
    roboz = subprocess.run(
        [sys.executable, "-m", "roboz.cli.app", "scripts", "list", "--socket", own_helper.socket_path],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert roboz.returncode == 126, roboz.stderr
    assert "profiles.test.scripts_dir" in roboz.stderr and "does not exist" in roboz.stderr
    log = own_helper.log()
    assert "Traceback" not in log
    assert "status=refused" in log and 'reason="this profile cannot run on this host' in log
    # And a reload of the same policy is refused for the same reason; the daemon serves on.
    line = own_helper.reload("policy_reload_failed")
    assert "profiles.test.scripts_dir" in line and "does not exist" in line
    assert client.check().profile == "test"


@pytest.mark.root
def test_scripts_others_can_change_do_not_run_and_are_not_listed(own_helper: OwnHelper) -> None:
    client = SafeScriptsClient(own_helper.socket_path)
    hello = own_helper.base / "scripts" / "hello.sh"
    names = [s.name for s in client.list_scripts()]
    assert "hello.sh" in names and "sub/nested.sh" in names
    hello.chmod(0o775)
    refused = client.run_script("hello.sh")
    assert refused.status == "refused"
    assert refused.diagnostic == (
        "script 'hello.sh' is writable by group or others (mode 0o775); only its owner may write it"
    )
    hello.chmod(0o755)
    os.chown(hello, NOBODY, NOBODY)
    assert "is owned by uid 65534" in client.run_script("hello.sh").diagnostic
    sub = own_helper.base / "scripts" / "sub"
    sub.chmod(0o777)
    nested = client.run_script("sub/nested.sh")
    assert nested.status == "refused" and "the directory 'sub' is writable" in nested.diagnostic
    names = [s.name for s in client.list_scripts()]
    assert "hello.sh" not in names and "sub/nested.sh" not in names and "fail.sh" in names


def test_untrusted_reason_is_the_one_rule(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    (tmp_path / "f").chmod(0o700)
    assert scripts.untrusted_reason((tmp_path / "f").stat()) is None
    (tmp_path / "f").chmod(0o702)
    assert "writable by group or others" in str(scripts.untrusted_reason((tmp_path / "f").stat()))


@pytest.mark.root
def test_the_shared_test_tree_passes_its_own_checks(needs_root: None) -> None:
    base = make_base("roboz-helper-paths-")
    try:
        build_tree(base)
        policy = parse_policy(policy_text(base, str(base / "helper.sock")))
        assert host_paths.policy_problems(policy) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)
