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
import stat
from typing import Any

import msgspec

from roboz_helper.egress.allowlist import NetworkAllow
from roboz_helper.egress.config import (
    EgressConfig,
    EgressConfigError,
    check_egress,
    check_network,
)
from roboz_helper.file_policy import FilePolicy, FilePolicyError, load_file_policy
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
    network: NetworkMode | NetworkAllow = "none"
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
    # A file-permission policy (the guarded tools' TOML format) that narrows every run of
    # this profile, whatever the client sends: absolute path of the file.
    file_policy: str | None = None
    # That file, decoded and checked: filled in by load_file_policies (never from the TOML).
    file_rules: FilePolicy | None = None


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
    egress: EgressConfig = EgressConfig()
    clients: tuple[ClientRule, ...] = ()
    profiles: dict[str, Profile] = {}


# Profiles are decoded one by one so that an error can name the profile: msgspec reports dict
# keys as `[...]`, which would leave the reader guessing which profile is wrong.
class _Envelope(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    server: ServerConfig = ServerConfig()
    egress: EgressConfig = EgressConfig()
    clients: tuple[ClientRule, ...] = ()
    profiles: dict[str, dict[str, Any]] = {}


_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # fullmatch: `$` would let "PATH\n" in


def _clean(exc: msgspec.MsgspecError, prefix: str = "") -> str:
    """Turn msgspec's 'Expected ... - at `$.a.b`' into 'a.b: Expected ...'."""
    match = _AT.match(str(exc))
    assert match is not None  # the pattern matches any string
    # Dict keys show up as `[...]`; the prefix already names the profile, so drop them.
    path = prefix + (match["path"] or "").replace("[...]", "")
    path = path.lstrip(".")
    message = match["msg"]
    if path.endswith(".network") and (
        message.startswith("Invalid enum") or "str | object" in message
    ):
        message += ' (network is "none", "loopback" or a table {allow = ["host:port", ...]})'
    return f"{path or '(top level)'}: {message}"


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
    except RecursionError:
        # The TOML parser recurses once per level of [ or {: a few thousand levels exhaust it.
        raise PolicyError("invalid TOML: arrays or tables nested too deeply") from None
    profiles: dict[str, Profile] = {}
    for name, raw in envelope.profiles.items():
        if "file_rules" in raw:
            raise PolicyError(f"profiles.{name}.file_rules: unknown field; name a file policy "
                              "with file_policy")  # fmt: skip
        try:
            profiles[name] = msgspec.convert(raw, type=Profile, strict=True)
        except msgspec.ValidationError as exc:
            raise PolicyError(_clean(exc, f"profiles.{name}")) from None
    policy = Policy(
        server=envelope.server, egress=envelope.egress, clients=envelope.clients, profiles=profiles
    )
    validate(policy, look_up_names=look_up_names)
    return policy


# Far above any real policy; a bound so that a wrong path (a log, a device) is an error, not a
# daemon reading gigabytes on SIGHUP.
MAX_POLICY_BYTES = 1 << 20


def load_policy(path: str | os.PathLike[str], *, look_up_names: bool = True) -> Policy:
    name = os.fspath(path)
    try:
        # O_NONBLOCK: a FIFO put in the policy's place must not hang a reload forever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise PolicyError(f"cannot read policy {name}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PolicyError(f"cannot read policy {name}: not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_POLICY_BYTES + 1)
    except OSError as exc:
        raise PolicyError(f"cannot read policy {name}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_POLICY_BYTES:
        raise PolicyError(f"cannot read policy {name}: larger than {MAX_POLICY_BYTES} bytes")
    return parse_policy(data, look_up_names=look_up_names)


# --- semantic validation ---------------------------------------------------------------------


def _positive(value: float, field: str) -> None:
    if not (math.isfinite(value) and value > 0):
        raise PolicyError(f"{field}: must be a positive number, got {value!r}")


# msgspec decodes TOML integers of any size. Every integer limit passes through 64-bit fields
# (rlim_t, the init program's "<Q" words, cgroup files), so 2**62 is a bound no host refuses
# for size reasons; two limits have kernel bounds of their own, refused at run time otherwise:
# pids.max takes at most PID_MAX_LIMIT (4 << 20) and the zygote writes pids_max + 1 there (its
# pid 1 counts), and a run needs 4 descriptors (SandboxSpec checks it).
_LIMIT_RANGE: dict[str, tuple[int, int]] = {
    "pids_max": (1, (4 << 20) - 1),
    "nofile_max": (4, 1 << 30),
}
_LIMIT_MAX = 2**62


def _limit(value: float, field: str, name: str) -> None:
    _positive(value, field)
    if isinstance(value, int):
        low, high = _LIMIT_RANGE.get(name, (1, _LIMIT_MAX))
        if not low <= value <= high:
            raise PolicyError(f"{field}: must be within {low}..{high}, got {value}")


def _absolute(path: str, field: str) -> None:
    if "\0" in path:
        raise PolicyError(f"{field}: contains a NUL byte")
    if not path.startswith("/"):
        raise PolicyError(f"{field}: must be an absolute path, got {path!r}")
    # A path with `..` or `.` means something other than it looks like once binds are set up.
    if posixpath.normpath(path) != path.rstrip("/") and path != "/":
        raise PolicyError(f"{field}: must be a normalized path (no '..', '.', '//'), got {path!r}")


# uid_t and gid_t are 32 bits; (uid_t)-1 means "leave unchanged" to setresuid(2), so a
# policy naming 4294967295 would keep the helper's own (root) identity: the last usable id is
# one below it.
MAX_ID = 2**32 - 2
# A number is ASCII digits only: str.isdigit() also takes "²" and other digits int() refuses.
_NUMERIC = re.compile(r"[0-9]+")


def _name(name: str, kind: str) -> None:
    """A user or group name the C library can look up: the lookups raise ValueError on NUL."""
    if not name:
        raise PolicyError(f"{kind} name must not be empty")
    if "\0" in name:
        raise PolicyError(f"{kind} name {name!r} contains a NUL byte")
    if not name.isprintable():
        raise PolicyError(f"{kind} name {name!r} contains control characters")


def _id_in_range(value: int, kind: str) -> int:
    if not 0 <= value <= MAX_ID:
        raise PolicyError(f"{kind} id {value} is outside 0..{MAX_ID}")
    return value


def _user_syntax(name: str) -> int | None:
    """Check a user name or numeric uid without looking it up; the uid if numeric."""
    _name(name, "user")
    if not _NUMERIC.fullmatch(name):
        return None
    # int() refuses strings of over 4300 digits; no id needs more than ten.
    if len(name) > 10:
        raise PolicyError(f"user id {name[:12]}... ({len(name)} digits) is outside 0..{MAX_ID}")
    return _id_in_range(int(name), "user")


def _resolve_user(name: str) -> tuple[int, int]:
    """Return (uid, primary gid) for a user name or a numeric uid."""
    uid = _user_syntax(name)
    if uid is not None:
        try:
            entry = pwd.getpwuid(uid)
        except KeyError:
            # A numeric uid without a passwd entry is usable; its group is its own number.
            return uid, uid
    else:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise PolicyError(f"unknown user {name!r}") from None
    return entry.pw_uid, entry.pw_gid


def resolve_group(name: str) -> int:
    _name(name, "group")
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
    _limit(server.max_connections, "server.max_connections", "max_connections")
    _limit(server.max_runs_per_client, "server.max_runs_per_client", "max_runs_per_client")
    _positive(server.handshake_timeout_s, "server.handshake_timeout_s")
    if not 0 <= server.socket_mode <= 0o777:
        raise PolicyError(
            f"server.socket_mode: must be within 0o000..0o777, got {server.socket_mode:#o}"
        )
    if server.socket_group is not None:
        try:
            # Without look-ups (a policy for another host) the name is still checked.
            if look_up_names:
                resolve_group(server.socket_group)
            else:
                _name(server.socket_group, "group")
        except PolicyError as exc:
            raise PolicyError(f"server.socket_group: {exc}") from None


def _validate_egress(egress: EgressConfig) -> None:
    try:
        check_egress(egress)
    except EgressConfigError as exc:
        raise PolicyError(f"egress.{exc}") from None


def _validate_network(where: str, network: NetworkMode | NetworkAllow) -> None:
    if isinstance(network, str):
        return
    try:
        check_network(network)
    except EgressConfigError as exc:
        raise PolicyError(f"{where}.{exc}") from None


def _validate_profile(name: str, profile: Profile, look_up_names: bool) -> None:
    # The name appears in field paths and log lines, which must stay one line each.
    if not name or not name.isprintable():
        raise PolicyError(f"profiles: invalid profile name {name!r} (empty or control characters)")
    where = f"profiles.{name}"
    try:
        if look_up_names:
            run_as_ids(profile)
        elif _user_syntax(profile.run_as_user) == 0 or profile.run_as_user == "root":
            raise PolicyError(f"run_as_user {profile.run_as_user!r} is root")
    except PolicyError as exc:
        raise PolicyError(f"{where}.run_as_user: {exc}") from None
    _absolute(profile.scripts_dir, f"{where}.scripts_dir")
    if profile.file_policy is not None:
        _absolute(profile.file_policy, f"{where}.file_policy")
    _absolute(profile.workdir, f"{where}.workdir")
    for field in ("readonly_paths", "writable_paths", "commands"):
        for i, path in enumerate(getattr(profile, field)):
            _absolute(path, f"{where}.{field}[{i}]")
    for key, value in profile.env.items():
        if not _ENV_NAME.fullmatch(key):
            raise PolicyError(f"{where}.env: invalid variable name {key!r}")
        if "\0" in value:
            raise PolicyError(f"{where}.env.{key}: contains a NUL byte")
    for field in NUMERIC_LIMITS:
        _limit(getattr(profile, field), f"{where}.{field}", field)
    _validate_network(f"{where}.network", profile.network)


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
        elif rule.user is not None:
            _user_syntax(rule.user)
        if rule.group is not None and look_up_names:
            resolve_group(rule.group)
        elif rule.group is not None:
            _name(rule.group, "group")
    except PolicyError as exc:
        raise PolicyError(f"{where}.{selectors[0]}: {exc}") from None
    for field in ("uid", "gid"):
        value = getattr(rule, field)
        if value is not None and value < 0:
            raise PolicyError(f"{where}.{field}: must not be negative")
        if value is not None:
            try:
                _id_in_range(value, "user" if field == "uid" else "group")
            except PolicyError as exc:
                raise PolicyError(f"{where}.{field}: {exc}") from None


def validate(policy: Policy, *, look_up_names: bool = True) -> None:
    _validate_server(policy.server, look_up_names)
    _validate_egress(policy.egress)
    if not policy.profiles:
        raise PolicyError("profiles: at least one profile is required")
    for name, profile in policy.profiles.items():
        _validate_profile(name, profile, look_up_names)
    for i, rule in enumerate(policy.clients):
        _validate_client(i, rule, policy.profiles, look_up_names)


def load_file_policies(policy: Policy) -> Policy:
    """The policy with each profile's ``file_policy`` file read and checked (a host check:
    the file is on the host the helper runs on). Errors name the profile's field."""
    profiles = dict(policy.profiles)
    for name, profile in policy.profiles.items():
        if profile.file_policy is None:
            continue
        where = f"profiles.{name}.file_policy"
        try:
            rules = load_file_policy(profile.file_policy)
        except FilePolicyError as exc:
            raise PolicyError(f"{where}: {exc}") from None
        profiles[name] = msgspec.structs.replace(profile, file_rules=rules)
    return msgspec.structs.replace(policy, profiles=profiles)


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
