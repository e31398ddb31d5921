"""What a run asks for (SandboxSpec), how it ended (SandboxOutcome), and every plan made in
between, typed: the mounts (MountPlan), what sandbox-init is told (ChildPlan), the run's
descriptors (RunFds), a started run (Started) and a warm pid 1 the zygote offers (WarmOffer).

The plans are msgspec Structs: the zygote receives a ChildPlan as msgpack, and a warm pid 1's
shape is the encoding of the part of a plan it has already acted on (ChildPlan.shape_key).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol, get_args

import msgspec

from roboz_helper.egress.report import NetworkReport
from roboz_helper.file_policy import FilePolicy
from roboz_helper.run_states import Limit, RunStatus, SandboxNetwork

if TYPE_CHECKING:
    from .cgroups import RunCgroup

NETWORK_MODES: tuple[SandboxNetwork, ...] = get_args(SandboxNetwork)


class SandboxError(Exception):
    """A run could not be set up (bad spec, or the kernel refused a step of the set-up)."""


@dataclass(frozen=True)
class SandboxSpec:
    # argv[0]: for exec, the absolute allowlisted executable; for scripts, the script's name.
    argv: list[str]
    # For scripts: an O_RDONLY fd of the already-checked script. The sandbox runs exactly this
    # file (it bind-mounts the descriptor's inode, never the path); the caller closes its copy.
    script_fd: int | None
    uid: int
    gid: int
    workdir: str
    readonly_paths: tuple[str, ...]
    writable_paths: tuple[str, ...]
    network: SandboxNetwork
    env: dict[str, str]
    timeout_s: float
    max_output_bytes: int
    pids_max: int
    memory_max_bytes: int
    tmp_size_bytes: int
    max_file_bytes: int
    nofile_max: int
    cpu_time_s: int
    run_id: str
    # Composed restrictions of the run's view of its binds (the profile's file policy, the
    # client's): a path is reachable only where every one of them allows it (view.py).
    file_policies: tuple[FilePolicy, ...] = ()


@dataclass(frozen=True)
class SandboxOutcome:
    status: RunStatus
    exit_code: int | None
    signal: int | None
    diagnostic: str
    wall_time_s: float
    cpu_time_s: float
    peak_memory_bytes: int
    limit: Limit | None
    # network = "proxy": what the run's egress proxy session reported when the run ended.
    network: NetworkReport | None = None


class NetworkSession(Protocol):
    """A run's egress proxy (roboz_helper.egress.proxy.EgressSession), for network = "proxy":
    attached once the run's pid 1 exists, closed once nothing of the run is left."""

    def attach(self, pidfd: int) -> None:
        """Serve the listener pid 1 (``pidfd``) made; OSError if it cannot be taken."""
        ...

    async def close(self) -> NetworkReport: ...


# ------------------------------------------------------------------------------ plans ------


class Bind(msgspec.Struct, frozen=True, array_like=True):
    path: str  # same path on the host and in the sandbox
    attrs: int  # MOUNT_ATTR_* set on the clone (always applied recursively)


class ViewEntry(msgspec.Struct, frozen=True, array_like=True):
    """One mount of a run's file view (view.py): what pid 1 does at ``path``, which must
    still be the inode (dev, ino) the helper resolved."""

    kind: int  # view.MASK, READ_ONLY, WRITABLE, SKELETON, SKELETON_CHILD
    # Bytes, as the file system names it: a name need not be UTF-8 (msgpack's str must be).
    path: bytes
    dev: int
    ino: int


class SystemLayout(msgspec.Struct, frozen=True):
    """Which system entries exist here (mounts.system_layout)."""

    symlinks: tuple[tuple[str, str], ...]  # (path, target)
    binds: tuple[Bind, ...]


class MountPlan(msgspec.Struct, frozen=True):
    """The run's root filesystem, built by pid 1 (init_root.c) from this."""

    symlinks: tuple[tuple[str, str], ...]  # (path, target) of the system layout
    system: tuple[Bind, ...]  # system binds (cloned from the zygote's template when it has one)
    binds: tuple[Bind, ...]  # policy binds and the workdir, parents before children
    workdir: str
    tmp_size_bytes: int
    tmp_inodes: int
    root_size_bytes: int
    # Per request, so not part of a warm pid 1's shape: the script's copy and the file view.
    script_path: str | None = None
    script_bytes: bytes | None = None
    view: tuple[ViewEntry, ...] = ()

    def shape(self) -> MountPlan:
        """What a pid 1 builds before its request arrives."""
        if self.script_path is None and self.script_bytes is None and not self.view:
            return self
        return msgspec.structs.replace(self, script_path=None, script_bytes=None, view=())


_encode = msgspec.msgpack.Encoder().encode


class ChildPlan(msgspec.Struct, frozen=True):
    """One run as sandbox-init is told it (init_wire): who, which root, what it executes, and
    the cgroup the zygote makes for it. Descriptors travel apart (RunFds)."""

    rootless: bool
    uid: int
    gid: int
    network: SandboxNetwork
    mounts: MountPlan
    rlimits: tuple[tuple[int, int, int], ...]  # (resource, soft, hard)
    exec_path: str
    exec_argv: tuple[str, ...]
    env: dict[str, str]
    # Zygote mode: the run's cgroup, made by the zygote (or renamed from a pooled one).
    cgroup_name: str = ""
    pids_max: int = 0
    memory_max: int = 0
    in_cgroup: bool = False  # pid 1 (and so the run) already sits in the run's cgroup
    prepare_only: bool = False  # to the zygote: no run, only a warm pid 1 of this shape

    def shape_key(self) -> bytes:
        """Everything a warm pid 1 has already acted on; runs differing only in argv, env,
        script, file view and limits enforced later (rlimits, cgroup, deadline, output)
        share a shape. Which build of the system template its root was cloned from is checked
        apart (a warm sandbox expires with its build)."""
        return _encode((self.mounts.shape(), self.uid, self.gid, self.network, self.rootless))


class RunFds(NamedTuple):
    """The write ends a run's processes get (the helper reads the other ends) and the cgroup
    join files (cgroups.open_join_fds), in this order on every wire, as SCM_RIGHTS."""

    stdout_w: int
    stderr_w: int
    setup_w: int  # set-up errors (close-on-exec: EOF once the run has exec'd)
    status_w: int  # the run's status from pid 1 (direct mode: pid 1's pid first)
    cgroup_joins: tuple[int, ...] = ()

    def all(self) -> list[int]:
        return [self.stdout_w, self.stderr_w, self.setup_w, self.status_w, *self.cgroup_joins]

    @classmethod
    def received(cls, fds: list[int]) -> RunFds:
        return cls(fds[0], fds[1], fds[2], fds[3], tuple(fds[4:]))


@dataclass(frozen=True)
class Started:
    """A run whose start was handed to its pid 1 (or, in direct mode, to the starter
    that makes it)."""

    pid: int
    pidfd: int
    direct: bool  # pidfd is the starter's (direct mode), which reports pid 1's pid first
    cgroup: RunCgroup | None
    init_in_cgroup: bool  # pid 1 itself sits in the run's cgroup (a pooled one)


class WarmOffer(msgspec.Struct, frozen=True, array_like=True):
    """The zygote's offer of a prepared pid 1 (its pidfd and request socket travel as
    SCM_RIGHTS): its shape, its pooled cgroup and the limits that was made with, when it was
    built and when its system template's build expires (time.monotonic())."""

    key: bytes
    pid: int
    pool_name: str  # "" when there is no pooled cgroup
    pool_limits: tuple[int, int]  # (pids.max, memory limit)
    built_at: float
    expires_at: float


# ------------------------------------------------------------------------- validation ------


def _check_path(field: str, path: str) -> None:
    if not path or not os.path.isabs(path) or "\0" in path:
        raise SandboxError(f"{field}: {path!r} must be an absolute path without NUL bytes")
    if os.path.normpath(path) in ("/", "//"):
        raise SandboxError(f"{field}: binding the whole root filesystem is not allowed")


def validate(spec: SandboxSpec) -> None:
    """Refuse specs the sandbox must never run; messages name the offending field."""
    if spec.uid == 0 or spec.gid == 0:
        raise SandboxError("refusing to run as root: uid and gid must be non-zero (uid/gid)")
    if spec.uid < 0 or spec.gid < 0:
        raise SandboxError("uid/gid must be positive")
    if not spec.argv or any("\0" in a for a in spec.argv):
        raise SandboxError("argv must be non-empty and free of NUL bytes")
    if spec.script_fd is None and not os.path.isabs(spec.argv[0]):
        raise SandboxError(f"argv[0] {spec.argv[0]!r} must be an absolute executable path")
    if spec.network not in NETWORK_MODES:
        raise SandboxError(f"network must be one of {NETWORK_MODES}, not {spec.network!r}")
    _check_path("workdir", spec.workdir)
    for p in spec.readonly_paths:
        _check_path("readonly_paths", p)
    for p in spec.writable_paths:
        _check_path("writable_paths", p)
    for key, value in spec.env.items():
        if not key or "=" in key or "\0" in key or "\0" in value:
            raise SandboxError(f"env: invalid variable {key!r}")
    positive: dict[str, float] = {
        "timeout_s": spec.timeout_s,
        "max_output_bytes": spec.max_output_bytes,
        "pids_max": spec.pids_max,
        "memory_max_bytes": spec.memory_max_bytes,
        "tmp_size_bytes": spec.tmp_size_bytes,
        "max_file_bytes": spec.max_file_bytes,
        "nofile_max": spec.nofile_max,
        "cpu_time_s": spec.cpu_time_s,
    }
    for field_name, number in positive.items():
        if not number > 0:
            raise SandboxError(f"{field_name} must be positive, got {number!r}")
    if spec.nofile_max < 4:
        raise SandboxError("nofile_max must be at least 4")
    if not spec.run_id or not all(c.isalnum() or c in "-_." for c in spec.run_id):
        raise SandboxError(f"run_id {spec.run_id!r}: use letters, digits, '-', '_', '.'")
    if spec.run_id.startswith("."):
        raise SandboxError("run_id must not start with '.'")
