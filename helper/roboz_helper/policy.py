"""Helper policy files: TOML decoded strictly into Structs, then checked for meaning.

Decoding rejects unknown keys and wrong types; validation then rejects what decodes but is
unsafe or nonsensical (a run as root, relative paths, non-positive limits, a client rule that
names a missing profile). Every error names the field path, e.g. ``profiles.ci.timeout_s``.
"""

from __future__ import annotations

import grp
import math
import os
import posixpath
import pwd
import re
from typing import Any

import msgspec

from roboz_helper.run_states import NetworkMode

DEFAULT_SOCKET = "/run/roboz-helper/helper.sock"


class PolicyError(ValueError):
    """A policy file is unreadable, malformed or unsafe; the message names the field."""


class ServerConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    socket: str = DEFAULT_SOCKET
    max_connections: int = 64
    max_runs_per_client: int = 4
    handshake_timeout_s: float = 5.0
    socket_group: str | None = None
    socket_mode: int = 0o660


class ClientRule(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """Match a peer by exactly one of uid, gid, user or group and give it a profile."""

    profile: str
    uid: int | None = None
    gid: int | None = None
    user: str | None = None
    group: str | None = None


class Profile(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    run_as_user: str
    scripts_dir: str
    workdir: str
    readonly_paths: tuple[str, ...] = ()
    writable_paths: tuple[str, ...] = ()
    network: NetworkMode = "none"
    commands: tuple[str, ...] = ()
    env: dict[str, str] = {}
    timeout_s: float = 30.0
    max_output_bytes: int = 1 << 20
    pids_max: int = 64
    memory_max_bytes: int = 256 << 20
    tmp_size_bytes: int = 64 << 20
    max_file_bytes: int = 64 << 20
    nofile_max: int = 256
    cpu_time_s: int = 30


# A profile's numeric limits, under these names in the policy, on the wire (protocol.Limits)
# and in the sandbox (SandboxSpec): validated here, copied by name in runs.py.
NUMERIC_LIMITS = (
    "timeout_s",
    "max_output_bytes",
    "pids_max",
    "memory_max_bytes",
    "tmp_size_bytes",
    "max_file_bytes",
    "nofile_max",
    "cpu_time_s",
)


class Policy(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    server: ServerConfig = ServerConfig()
    clients: tuple[ClientRule, ...] = ()
    profiles: dict[str, Profile] = {}


# Profiles are decoded one by one so that an error can name the profile: msgspec reports dict
# keys as `[...]`, which would leave the reader guessing which profile is wrong.
class _Envelope(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    server: ServerConfig = ServerConfig()
    clients: tuple[ClientRule, ...] = ()
    profiles: dict[str, dict[str, Any]] = {}


_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _clean(exc: msgspec.MsgspecError, prefix: str = "") -> str:
    """Turn msgspec's 'Expected ... - at `$.a.b`' into 'a.b: Expected ...'."""
    match = _AT.match(str(exc))
    assert match is not None  # the pattern matches any string
    # Dict keys show up as `[...]`; the prefix already names the profile, so drop them.
    path = prefix + (match["path"] or "").replace("[...]", "")
    path = path.lstrip(".")
    return f"{path or '(top level)'}: {match['msg']}"


def parse_policy(text: str | bytes, *, look_up_names: bool = True) -> Policy:
    """Decode and validate policy TOML; raises PolicyError naming the offending field.

    ``look_up_names=False`` leaves out the user and group look-ups (for a policy meant for
    another host, whose users this one may not have)."""
    try:
        envelope = msgspec.toml.decode(text, type=_Envelope, strict=True)
    except msgspec.ValidationError as exc:
        raise PolicyError(_clean(exc)) from None
    except msgspec.DecodeError as exc:
        raise PolicyError(f"invalid TOML: {exc}") from None
    profiles: dict[str, Profile] = {}
    for name, raw in envelope.profiles.items():
        try:
            profiles[name] = msgspec.convert(raw, type=Profile, strict=True)
        except msgspec.ValidationError as exc:
            raise PolicyError(_clean(exc, f"profiles.{name}")) from None
    policy = Policy(server=envelope.server, clients=envelope.clients, profiles=profiles)
    validate(policy, look_up_names=look_up_names)
    return policy


def load_policy(path: str | os.PathLike[str], *, look_up_names: bool = True) -> Policy:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise PolicyError(f"cannot read policy {os.fspath(path)}: {exc.strerror}") from None
    return parse_policy(data, look_up_names=look_up_names)


# --- semantic validation ---------------------------------------------------------------------


def _positive(value: float, field: str) -> None:
    if not (math.isfinite(value) and value > 0):
        raise PolicyError(f"{field}: must be a positive number, got {value!r}")


def _absolute(path: str, field: str) -> None:
    if "\0" in path:
        raise PolicyError(f"{field}: contains a NUL byte")
    if not path.startswith("/"):
        raise PolicyError(f"{field}: must be an absolute path, got {path!r}")
    # A path with `..` or `.` means something other than it looks like once binds are set up.
    if posixpath.normpath(path) != path.rstrip("/") and path != "/":
        raise PolicyError(f"{field}: must be a normalized path (no '..', '.', '//'), got {path!r}")


def _resolve_user(name: str) -> tuple[int, int]:
    """Return (uid, primary gid) for a user name or a numeric uid."""
    try:
        entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except (KeyError, ValueError):
        if name.isdigit():
            # A numeric uid without a passwd entry is usable; its group is its own number.
            return int(name), int(name)
        raise PolicyError(f"unknown user {name!r}") from None
    return entry.pw_uid, entry.pw_gid


def resolve_group(name: str) -> int:
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise PolicyError(f"unknown group {name!r}") from None


def run_as_ids(profile: Profile) -> tuple[int, int]:
    """The uid and gid a profile's runs use; never root."""
    uid, gid = _resolve_user(profile.run_as_user)
    if uid == 0 or gid == 0:
        raise PolicyError(f"run_as_user {profile.run_as_user!r} resolves to root (uid/gid 0)")
    return uid, gid


def _validate_server(server: ServerConfig, look_up_names: bool) -> None:
    _absolute(server.socket, "server.socket")
    _positive(server.max_connections, "server.max_connections")
    _positive(server.max_runs_per_client, "server.max_runs_per_client")
    _positive(server.handshake_timeout_s, "server.handshake_timeout_s")
    if not 0 <= server.socket_mode <= 0o777:
        raise PolicyError(
            f"server.socket_mode: must be within 0o000..0o777, got {server.socket_mode:#o}"
        )
    if server.socket_group is not None and look_up_names:
        try:
            resolve_group(server.socket_group)
        except PolicyError as exc:
            raise PolicyError(f"server.socket_group: {exc}") from None


def _validate_profile(name: str, profile: Profile, look_up_names: bool) -> None:
    where = f"profiles.{name}"
    try:
        if look_up_names:
            run_as_ids(profile)
        elif profile.run_as_user in ("0", "root"):
            raise PolicyError(f"run_as_user {profile.run_as_user!r} is root")
    except PolicyError as exc:
        raise PolicyError(f"{where}.run_as_user: {exc}") from None
    _absolute(profile.scripts_dir, f"{where}.scripts_dir")
    _absolute(profile.workdir, f"{where}.workdir")
    for field in ("readonly_paths", "writable_paths", "commands"):
        for i, path in enumerate(getattr(profile, field)):
            _absolute(path, f"{where}.{field}[{i}]")
    for key, value in profile.env.items():
        if not _ENV_NAME.match(key):
            raise PolicyError(f"{where}.env: invalid variable name {key!r}")
        if "\0" in value:
            raise PolicyError(f"{where}.env.{key}: contains a NUL byte")
    for field in NUMERIC_LIMITS:
        _positive(getattr(profile, field), f"{where}.{field}")


def _validate_client(
    i: int, rule: ClientRule, profiles: dict[str, Profile], look_up_names: bool
) -> None:
    where = f"clients[{i}]"
    selectors = [s for s in ("uid", "gid", "user", "group") if getattr(rule, s) is not None]
    if len(selectors) != 1:
        raise PolicyError(f"{where}: needs exactly one of uid, gid, user, group (got {selectors})")
    if rule.profile not in profiles:
        raise PolicyError(f"{where}.profile: no profile named {rule.profile!r}")
    try:
        if rule.user is not None and look_up_names:
            _resolve_user(rule.user)
        if rule.group is not None and look_up_names:
            resolve_group(rule.group)
    except PolicyError as exc:
        raise PolicyError(f"{where}.{selectors[0]}: {exc}") from None
    for field in ("uid", "gid"):
        value = getattr(rule, field)
        if value is not None and value < 0:
            raise PolicyError(f"{where}.{field}: must not be negative")


def validate(policy: Policy, *, look_up_names: bool = True) -> None:
    _validate_server(policy.server, look_up_names)
    if not policy.profiles:
        raise PolicyError("profiles: at least one profile is required")
    for name, profile in policy.profiles.items():
        _validate_profile(name, profile, look_up_names)
    for i, rule in enumerate(policy.clients):
        _validate_client(i, rule, policy.profiles, look_up_names)


# --- client matching -------------------------------------------------------------------------


def match_client(policy: Policy, uid: int, gid: int, groups: tuple[int, ...]) -> str | None:
    """The profile of the first rule that matches the peer, or None (refuse)."""
    all_groups = {gid, *groups}
    for rule in policy.clients:
        try:
            if rule.uid is not None and rule.uid == uid:
                return rule.profile
            if rule.user is not None and _resolve_user(rule.user)[0] == uid:
                return rule.profile
            if rule.gid is not None and rule.gid in all_groups:
                return rule.profile
            if rule.group is not None and resolve_group(rule.group) in all_groups:
                return rule.profile
        except PolicyError:
            # A user or group deleted since the policy was checked matches nobody.
            continue
    return None
