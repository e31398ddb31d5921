"""Hostile policy files: whatever a policy says, `roboz-helper check-policy` exits 0, or 2 with
errors that name their field, one per line; never 1 with "unexpected ValueError".

The named cases are the ones found (a superscript digit as a uid, NUL in a group name, ids
outside uid_t); the property test looks for their siblings across every field of the file.
"""

from __future__ import annotations

import contextlib
import io
import math
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from roboz_helper import cli
from roboz_helper.policy import PolicyError, parse_policy

MAX_ID = 2**32 - 2

PREFIX = "roboz-helper: error:"

# Paths that exist on every test host and pass the host checks, so that check-policy gets past
# them to the field under test: scripts_dir must be a root-owned directory.
GOOD = {
    "server": {"socket": "/run/roboz-test.sock"},
    "client": ("uid", 1000),
    "profile_name": "dev",
    "profile": {
        "run_as_user": "nobody",
        "scripts_dir": "/usr/bin",
        "workdir": "/tmp",
        "commands": ["/bin/sh"],
        "env": {"PATH": "/usr/bin"},
        "timeout_s": 5.0,
        "pids_max": 16,
    },
}


def _toml_value(value: object) -> str:
    """TOML for a str, int, float, bool or list; every odd character as a \\U escape, so the
    file carries exactly the string under test (a lone surrogate makes the TOML invalid)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, str):
        escaped = "".join(
            c if " " <= c <= "~" and c not in '"\\' else f"\\U{ord(c):08X}" for c in value
        )
        return f'"{escaped}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(value)


def _policy_text(spec: dict[str, object]) -> str:
    server = spec["server"]
    profile = spec["profile"]
    selector, match = spec["client"]  # type: ignore[misc]
    assert isinstance(server, dict) and isinstance(profile, dict)
    lines = ["[server]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in server.items()]
    lines += ["", "[[clients]]", f"{selector} = {_toml_value(match)}"]
    lines += [f"profile = {_toml_value(spec['profile_name'])}", ""]
    lines.append(f"[profiles.{_toml_value(spec['profile_name'])}]")
    for key, value in profile.items():
        if key == "env":
            assert isinstance(value, dict)
            pairs = ", ".join(f"{_toml_value(k)} = {_toml_value(v)}" for k, v in value.items())
            lines.append(f"env = {{ {pairs} }}")
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def _check_policy(data: bytes) -> tuple[int, str, str]:
    """`roboz-helper check-policy FILE` in this process (the same main() the command runs)."""
    with tempfile.NamedTemporaryFile(suffix=".toml") as fh:
        fh.write(data)
        fh.flush()
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["check-policy", fh.name])
    return code, out.getvalue(), err.getvalue()


def _assert_clean_outcome(code: int, out: str, err: str) -> None:
    assert code in (0, 2), (code, err)
    if code == 0:
        assert ": ok (" in out and err == ""
        return
    lines = err.splitlines()
    # One line per error (host path problems are several errors), each with the prefix.
    assert lines, "exit 2 without an error line"
    assert all(line.startswith(PREFIX) for line in lines), err
    # main()'s catch-all says "unexpected TypeName: ..."; a policy error starts with the file.
    assert not any(line.startswith(f"{PREFIX} unexpected ") for line in lines), err
    assert "Traceback" not in err, err


def test_the_good_policy_passes() -> None:
    code, out, err = _check_policy(_policy_text(GOOD).encode())
    assert (code, err) == (0, ""), err
    assert ": ok (" in out


def _with(section: str, key: str, value: object) -> dict[str, object]:
    spec: dict[str, object] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in GOOD.items()}
    target = spec[section]
    assert isinstance(target, dict)
    target[key] = value
    return spec


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        # "²".isdigit() is true, but int() refuses it: it is a (non-existent) name.
        (_with("profile", "run_as_user", "²"), "profiles.dev.run_as_user", "unknown user '²'"),
        (_with("profile", "run_as_user", "٣"), "profiles.dev.run_as_user", "unknown user"),
        (_with("profile", "run_as_user", "a\0b"), "profiles.dev.run_as_user", "NUL byte"),
        (_with("profile", "run_as_user", "no\nbody"), "profiles.dev.run_as_user", "control"),
        (_with("profile", "run_as_user", ""), "profiles.dev.run_as_user", "must not be empty"),
        # (uid_t)-1 would leave setresuid(2) keeping root; 2**32 and beyond do not exist.
        (_with("profile", "run_as_user", str(2**32 - 1)), "profiles.dev.run_as_user", "outside"),
        (_with("profile", "run_as_user", str(2**40)), "profiles.dev.run_as_user", "outside"),
        (_with("profile", "run_as_user", "9" * 5000), "profiles.dev.run_as_user", "outside"),
        (_with("server", "socket_group", "a\0b"), "server.socket_group", "NUL byte"),
        (_with("server", "socket", "/run/a\0b"), "server.socket", "NUL byte"),
        (_with("server", "max_connections", 2**64), "server.max_connections", "within"),
        (_with("profile", "workdir", "/tmp\0x"), "profiles.dev.workdir", "NUL byte"),
        (_with("profile", "commands", ["/bin/\0sh"]), "profiles.dev.commands[0]", "NUL byte"),
        (_with("profile", "env", {"PATH\n": "x"}), "profiles.dev.env", "invalid variable"),
        (_with("profile", "env", {"A": "x\0y"}), "profiles.dev.env.A", "NUL byte"),
        # Beyond what pids.max, RLIMIT_NOFILE or a 64-bit field takes: refused at run time.
        (_with("profile", "pids_max", 2**40), "profiles.dev.pids_max", "within"),
        (_with("profile", "nofile_max", 3), "profiles.dev.nofile_max", "within"),
        (_with("profile", "memory_max_bytes", 2**64), "profiles.dev.memory_max_bytes", "within"),
        (_with("profile", "cpu_time_s", 2**63), "profiles.dev.cpu_time_s", "within"),
        ({**GOOD, "client": ("user", "a\0b")}, "clients[0].user", "NUL byte"),
        ({**GOOD, "client": ("group", "x\0")}, "clients[0].group", "NUL byte"),
        ({**GOOD, "client": ("uid", 2**32 - 1)}, "clients[0].uid", "outside"),
        ({**GOOD, "client": ("gid", 2**70)}, "clients[0].gid", "outside"),
        ({**GOOD, "profile_name": "a\nb"}, "profiles", "invalid profile name"),
    ],
)
def test_hostile_fields_exit_2_naming_the_field(
    spec: dict[str, object], field: str, reason: str
) -> None:
    code, _, err = _check_policy(_policy_text(spec).encode())
    assert code == 2, err
    (line,) = err.splitlines()
    assert line.startswith(f"{PREFIX} ") and f": {field}: " in line and reason in line, line


@pytest.mark.parametrize("depth", [500, 100_000])
@pytest.mark.parametrize(("opening", "closing"), [("[", "]"), ("{a=", "}")])
def test_deep_nesting_exits_2(depth: int, opening: str, closing: str) -> None:
    # The TOML parser recurses per level: this was an "unexpected RecursionError", exit 1.
    text = _policy_text(GOOD) + f"deep = {opening * depth}1{closing * depth}\n"
    code, _, err = _check_policy(text.encode())
    assert code == 2, err
    (line,) = err.splitlines()
    assert line.endswith(": invalid TOML: arrays or tables nested too deeply"), line


def test_the_highest_process_limit_is_one_below_the_kernels() -> None:
    # The zygote writes pids_max + 1 to pids.max, which takes at most PID_MAX_LIMIT (4 << 20).
    text = _policy_text(_with("profile", "pids_max", (4 << 20) - 1)).replace("/usr/bin", "/srv")
    assert parse_policy(text).profiles["dev"].pids_max == (4 << 20) - 1
    with pytest.raises(PolicyError, match="pids_max: must be within 1..4194303"):
        parse_policy(text.replace(str((4 << 20) - 1), str(4 << 20)))


def test_the_highest_usable_id_is_accepted() -> None:
    text = _policy_text(_with("profile", "run_as_user", str(MAX_ID))).replace("/usr/bin", "/srv")
    profile = parse_policy(text).profiles["dev"]
    assert profile.run_as_user == str(MAX_ID)
    with pytest.raises(PolicyError, match="outside"):
        parse_policy(text.replace(str(MAX_ID), str(MAX_ID + 1)))


# --- siblings: any value in any field --------------------------------------------------------

_names = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["nobody", "root", "0", "65534", "²", "1e3", " 1", "-1", str(2**32)]),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
)
_paths = st.one_of(st.text(max_size=12), st.text(max_size=12).map(lambda s: "/" + s))
_ints = st.one_of(st.integers(), st.integers(min_value=-(2**70), max_value=2**70))
_floats = st.one_of(st.floats(), _ints)
_scalars = st.one_of(_names, _ints, _floats, st.booleans())

_FIELDS: dict[tuple[str, str], st.SearchStrategy[object]] = {
    ("server", "socket"): _paths,
    ("server", "socket_group"): _names,
    ("server", "socket_mode"): _ints,
    ("server", "max_connections"): _ints,
    ("server", "max_runs_per_client"): _ints,
    ("server", "handshake_timeout_s"): _floats,
    ("profile", "run_as_user"): _names,
    ("profile", "scripts_dir"): _paths,
    ("profile", "workdir"): _paths,
    ("profile", "readonly_paths"): st.lists(_paths, max_size=2),
    ("profile", "writable_paths"): st.lists(_paths, max_size=2),
    ("profile", "commands"): st.lists(_paths, max_size=2),
    ("profile", "env"): st.dictionaries(_names, _names, max_size=2),
    ("profile", "network"): _names,
    **{("profile", k): _floats for k in ("timeout_s", "cpu_time_s", "pids_max", "nofile_max")},
    **{("profile", k): _ints for k in ("max_output_bytes", "memory_max_bytes", "tmp_size_bytes")},
    ("profile", "max_file_bytes"): _scalars,
}


@st.composite
def _hostile_specs(draw: st.DrawFn) -> dict[str, object]:
    spec: dict[str, object] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in GOOD.items()}
    for section, key in draw(st.lists(st.sampled_from(sorted(_FIELDS)), min_size=1, max_size=3)):
        target = spec[section]
        assert isinstance(target, dict)
        target[key] = draw(_FIELDS[(section, key)])
    if draw(st.booleans()):
        selector = draw(st.sampled_from(["uid", "gid", "user", "group"]))
        spec["client"] = (selector, draw(_ints if selector in ("uid", "gid") else _names))
    if draw(st.booleans()):
        spec["profile_name"] = draw(_names)
    return spec


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_hostile_specs())
def test_any_field_value_exits_0_or_2_with_one_line_per_error(spec: dict[str, object]) -> None:
    _assert_clean_outcome(*_check_policy(_policy_text(spec).encode()))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_mangled_file_exits_0_or_2(data: st.DataObject) -> None:
    text = bytearray(_policy_text(GOOD).encode())
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        at = data.draw(st.integers(min_value=0, max_value=len(text)))
        junk = data.draw(st.binary(min_size=0, max_size=6))
        cut = data.draw(st.integers(min_value=0, max_value=4))
        text[at : at + cut] = junk
    _assert_clean_outcome(*_check_policy(bytes(text)))


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        (_with("server", "socket_group", "a\0b"), "server.socket_group", "NUL byte"),
        (_with("profile", "run_as_user", str(MAX_ID + 1)), "profiles.dev.run_as_user", "outside"),
        (_with("profile", "run_as_user", "0"), "profiles.dev.run_as_user", "root"),
    ],
)
def test_skip_paths_still_checks_names_and_ids(
    spec: dict[str, object], field: str, reason: str
) -> None:
    # --skip-paths leaves out this host's look-ups, not the checks of what the file says.
    with tempfile.NamedTemporaryFile(suffix=".toml") as fh:
        fh.write(_policy_text(spec).encode())
        fh.flush()
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = cli.main(["check-policy", "--skip-paths", fh.name])
    assert code == 2, err.getvalue()
    assert f"{field}: " in err.getvalue() and reason in err.getvalue(), err.getvalue()
