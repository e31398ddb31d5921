"""Policy decoding and validation: strict schema, meaningful checks, errors that name fields."""

from __future__ import annotations

import pwd
import subprocess
import sys
from pathlib import Path

import pytest
from roboz_helper import policy as policy_mod
from roboz_helper.policy import PolicyError, load_policy, match_client, parse_policy

POLICIES = Path(__file__).resolve().parents[2] / "policies"

BASE = """
[[clients]]
uid = 1000
profile = "dev"

[profiles.dev]
run_as_user = "nobody"
scripts_dir = "/srv/scripts"
workdir = "/srv/work"
"""


def _error(text: str) -> str:
    with pytest.raises(PolicyError) as info:
        parse_policy(text)
    return str(info.value)


def test_minimal_policy_gets_safe_defaults() -> None:
    policy = parse_policy(BASE)
    dev = policy.profiles["dev"]
    assert dev.network == "none"
    assert dev.commands == ()
    assert dev.env == {}
    assert policy.server.socket_mode == 0o660
    assert policy.clients[0].profile == "dev"


@pytest.mark.parametrize("name", ["workstation.toml", "ci.toml"])
def test_shipped_policies_are_valid(name: str) -> None:
    policy = load_policy(POLICIES / name)
    assert policy.profiles


def test_strict_policy_is_valid_once_its_users_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    # strict.toml names the user and group that the sysusers snippet creates on install.
    nobody = pwd.getpwnam("nobody")
    real_getpwnam = pwd.getpwnam

    def fake_getpwnam(name: str) -> pwd.struct_passwd:
        return nobody if name == "roboz-run" else real_getpwnam(name)

    monkeypatch.setattr(policy_mod.pwd, "getpwnam", fake_getpwnam)
    monkeypatch.setattr(policy_mod, "resolve_group", lambda name: 4242)
    policy = load_policy(POLICIES / "strict.toml")
    assert policy.profiles["locked"].commands == ()
    assert policy.server.socket_group == "roboz-helper"


@pytest.mark.parametrize(
    ("addition", "expected"),
    [
        ("[server]\nsockett = '/x'\n", "server: Object contains unknown field `sockett`"),
        ("[server]\nmax_connections = 'many'\n", "server.max_connections: Expected `int`"),
        ("[server]\nmax_connections = 0\n", "server.max_connections: must be a positive"),
        ("[server]\nhandshake_timeout_s = nan\n", "server.handshake_timeout_s: must be a positive"),
        ("[server]\nsocket = 'rel.sock'\n", "server.socket: must be an absolute path"),
        ("[server]\nsocket_mode = 0o1777\n", "server.socket_mode: must be within"),
        ("[server]\nsocket_group = 'no-such-group-xyz'\n", "server.socket_group: unknown group"),
        ("[[clients]]\nprofile = 'dev'\n", "clients[1]: needs exactly one of"),
        ("[[clients]]\nuid = 1\ngid = 2\nprofile = 'dev'\n", "clients[1]: needs exactly one of"),
        ("[[clients]]\nuid = 1\nprofile = 'nope'\n", "clients[1].profile: no profile named 'nope'"),
        ("[[clients]]\nuser = 'no-such-user-xyz'\nprofile = 'dev'\n", "clients[1].user: unknown"),
        ("[[clients]]\nuid = '1'\nprofile = 'dev'\n", "clients[1].uid: Expected `int | null`"),
    ],
)
def test_server_and_client_errors_name_the_field(addition: str, expected: str) -> None:
    assert expected in _error(BASE + addition)


def _profile(**fields: str) -> str:
    lines = {
        "run_as_user": '"nobody"',
        "scripts_dir": '"/srv/scripts"',
        "workdir": '"/srv/work"',
        **fields,
    }
    return "[profiles.p]\n" + "".join(f"{k} = {v}\n" for k, v in lines.items())


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"run_as_user": '"root"'}, "profiles.p.run_as_user: run_as_user 'root' resolves to root"),
        ({"run_as_user": '"0"'}, "profiles.p.run_as_user: run_as_user '0' resolves to root"),
        ({"run_as_user": '"no-such-user-xyz"'}, "profiles.p.run_as_user: unknown user"),
        ({"scripts_dir": '"scripts"'}, "profiles.p.scripts_dir: must be an absolute path"),
        ({"workdir": '"/srv/../etc"'}, "profiles.p.workdir: must be a normalized path"),
        ({"readonly_paths": '["/ok", "rel"]'}, "profiles.p.readonly_paths[1]: must be an absolute"),
        ({"writable_paths": '["/a/./b"]'}, "profiles.p.writable_paths[0]: must be a normalized"),
        ({"commands": '["ls"]'}, "profiles.p.commands[0]: must be an absolute path"),
        ({"network": '"internet"'}, "profiles.p.network: Invalid enum value 'internet'"),
        ({"timeout_s": "0"}, "profiles.p.timeout_s: must be a positive number"),
        ({"timeout_s": "inf"}, "profiles.p.timeout_s: must be a positive number"),
        ({"timeout_s": '"10"'}, "profiles.p.timeout_s: Expected `float`, got `str`"),
        ({"pids_max": "-1"}, "profiles.p.pids_max: must be a positive number"),
        ({"memory_max_bytes": "1.5"}, "profiles.p.memory_max_bytes: Expected `int`, got `float`"),
        ({"nofile_max": "0"}, "profiles.p.nofile_max: must be a positive"),
        ({"cpu_time_s": "true"}, "profiles.p.cpu_time_s: Expected `int`, got `bool`"),
        ({"env": '{ "BAD-NAME" = "x" }'}, "profiles.p.env: invalid variable name 'BAD-NAME'"),
        ({"env": "{ A = 1 }"}, "profiles.p.env: Expected `str`, got `int`"),
        ({"shell": '"/bin/sh"'}, "profiles.p: Object contains unknown field `shell`"),
    ],
)
def test_profile_errors_name_the_profile_and_field(fields: dict[str, str], expected: str) -> None:
    assert expected in _error(_profile(**fields))


def test_unknown_top_level_key() -> None:
    assert (
        _error("surprise = 1\n" + BASE) == "(top level): Object contains unknown field `surprise`"
    )


def test_a_policy_needs_a_profile() -> None:
    assert "profiles: at least one profile" in _error("[server]\nmax_connections = 3\n")


def test_invalid_toml_is_reported_as_such() -> None:
    assert _error("[profiles.x\n").startswith("invalid TOML:")


def test_unreadable_file_is_a_policy_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read policy"):
        load_policy(tmp_path / "missing.toml")


def test_client_matching() -> None:
    policy = parse_policy(
        """
        [[clients]]
        uid = 1000
        profile = "a"
        [[clients]]
        gid = 500
        profile = "b"
        [[clients]]
        user = "nobody"
        profile = "c"
        [[clients]]
        group = "nogroup"
        profile = "d"
        """
        + "".join(
            f'[profiles.{n}]\nrun_as_user = "nobody"\nscripts_dir = "/s"\nworkdir = "/w"\n'
            for n in "abcd"
        )
    )
    nogroup = 65534
    assert match_client(policy, 1000, 500, ()) == "a"  # first matching rule wins
    assert match_client(policy, 7, 7, (500,)) == "b"  # supplementary groups count
    assert match_client(policy, 65534, 7, ()) == "c"
    assert match_client(policy, 7, nogroup, ()) == "d"
    assert match_client(policy, 7, 7, (8, 9)) is None
    assert match_client(policy, 0, 0, ()) is None  # root is not special: unlisted is refused


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "roboz_helper", *args], capture_output=True, text=True, timeout=60
    )


def _usable(tmp_path: Path, text: str = BASE) -> Path:
    """BASE with paths that exist on this host, written to a file."""
    for name in ("scripts", "work"):
        (tmp_path / name).mkdir(mode=0o755, exist_ok=True)
        (tmp_path / name).chmod(0o755)
    policy = tmp_path / "ok.toml"
    text = text.replace("/srv/scripts", str(tmp_path / "scripts"))
    policy.write_text(text.replace("/srv/work", str(tmp_path / "work")))
    return policy


def test_check_policy_command(tmp_path: Path) -> None:
    ok = _cli("check-policy", str(_usable(tmp_path)))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == (
        f"{tmp_path}/ok.toml: ok (1 profiles, 1 client rules; file and paths checked)"
    )
    # A policy written for another host: its paths are checked unless asked not to.
    shipped = _cli("check-policy", str(POLICIES / "workstation.toml"))
    assert shipped.returncode == 2
    assert "profiles.dev.scripts_dir: /srv/roboz/scripts: does not exist" in shipped.stderr
    file_only = _cli("check-policy", "--skip-paths", str(POLICIES / "workstation.toml"))
    assert file_only.returncode == 0, file_only.stderr
    assert "file only checked" in file_only.stdout


def test_skip_paths_skips_the_user_and_group_lookups_too(tmp_path: Path) -> None:
    """A policy for another host names users and groups this host lacks: with --skip-paths the
    file is still checked, but nothing is looked up on this host, and the output says so."""
    text = (POLICIES / "strict.toml").read_text()
    text = text.replace('"roboz-run"', '"no-such-user-here"')
    text = text.replace('"roboz-helper"', '"no-such-group-here"')
    other = tmp_path / "other-host.toml"
    other.write_text(text)
    here = _cli("check-policy", str(other))
    assert here.returncode == 2 and "unknown group 'no-such-group-here'" in here.stderr
    result = _cli("check-policy", "--skip-paths", str(other))
    assert result.returncode == 0, result.stderr
    assert "users and groups not looked up" in result.stdout
    # The file itself is still checked.
    other.write_text(text.replace("timeout_s = ", "timeout_s = -1 #"))
    assert _cli("check-policy", "--skip-paths", str(other)).returncode == 2

    bad = tmp_path / "bad.toml"
    bad.write_text(_profile(timeout_s="-3"))
    result = _cli("check-policy", str(bad))
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0  # one clear line
    assert result.stderr.startswith(f"roboz-helper: error: {bad}: profiles.p.timeout_s: ")
    assert "profiles.p.timeout_s: must be a positive number" in result.stderr

    missing = _cli("check-policy", str(tmp_path / "nope.toml"))
    assert missing.returncode == 2
    assert missing.stderr.startswith("roboz-helper: error: ")
    assert "cannot read policy" in missing.stderr


def test_cli_usage_errors_and_help() -> None:
    assert _cli("--help").returncode == 0
    for sub in ("serve", "check-policy"):
        shown = _cli(sub, "--help")
        assert shown.returncode == 0
        assert sub in shown.stdout
    assert _cli().returncode == 2
    assert _cli("serve").returncode == 2  # --policy is required
    assert _cli("frobnicate").returncode == 2


def test_serve_with_an_invalid_policy_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(_profile(run_as_user='"root"'))
    result = _cli("serve", "--policy", str(bad), "--socket", str(tmp_path / "s.sock"))
    assert result.returncode == 2
    assert "resolves to root" in result.stderr
    assert not (tmp_path / "s.sock").exists()


def test_serve_reports_an_unusable_socket_path_in_one_line(tmp_path: Path) -> None:
    policy = _usable(tmp_path)
    result = _cli("serve", "--policy", str(policy), "--socket", str(tmp_path / "no/dir/s.sock"))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"roboz-helper: error: cannot bind {tmp_path}/no/dir/s.sock: No such file or directory"
    )


def test_serve_refuses_to_replace_a_file(tmp_path: Path) -> None:
    policy = _usable(tmp_path)
    precious = tmp_path / "precious"
    precious.write_text("data")
    result = _cli("serve", "--policy", str(policy), "--socket", str(precious))
    assert result.returncode == 1
    assert "exists and is not a socket" in result.stderr
    assert precious.read_text() == "data"


def test_a_permission_policy_given_to_the_helper_checker_names_the_right_checker(
    tmp_path: Path,
) -> None:
    permissions = tmp_path / "permissions.toml"
    permissions.write_text(f'base = "{tmp_path}"\ndefault = "deny"\n[[allow]]\npattern = "**"\n')
    result = _cli("check-policy", "--skip-paths", str(permissions))
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert "unknown field `base`" in line
    assert "this is a permission policy" in line and "roboz mcp check-policy" in line
