"""What a run asks for (SandboxSpec) and how it ended (SandboxOutcome)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import get_args

from roboz_helper.file_policy import FilePolicy
from roboz_helper.run_states import NetworkMode

NETWORK_MODES: tuple[NetworkMode, ...] = get_args(NetworkMode)


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
    network: NetworkMode
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
    status: str  # a run_states.RunStatus (runs.completion_of checks it)
    exit_code: int | None
    signal: int | None
    diagnostic: str
    wall_time_s: float
    cpu_time_s: float
    peak_memory_bytes: int
    limit: str | None  # a run_states.Limit or None


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
