"""One cgroup per run: pids, memory and swap limits, usage, limit hits, and killing it all.

Two back-ends, chosen once per helper process:

- cgroup v2, when the unified hierarchy delegates ``memory`` and ``pids`` to the helper's own
  cgroup (systemd ``Delegate=yes``). The helper moves itself into a ``helper`` leaf (v2 forbids
  processes in inner cgroups) and creates ``run-<id>`` siblings with memory.max,
  memory.swap.max, pids.max; peak from memory.peak, hits from memory.events (oom_kill) and
  pids.events (max); kill with cgroup.kill.
- cgroup v1 (these machines: hybrid, v2 without controllers): ``roboz-sandbox/<id>`` below the
  helper's own cgroup in the pids, memory and freezer hierarchies; memory.limit_in_bytes plus
  memory.memsw.limit_in_bytes (swap) when swap accounting exists; peak from
  memory.max_usage_in_bytes; hits from memory.oom_control (oom_kill) and pids.events; kill by
  freezing, SIGKILLing every pid in cgroup.procs, thawing, until it is empty.

Only the run's own processes join the cgroup (the run process writes itself through descriptors
opened here, before it drops privileges); the helper's set-up processes stay outside, so
``pids_max`` counts exactly what the run started. A helper without a usable hierarchy (rootless,
no delegation) runs without a cgroup: rlimits still apply and the pid namespace still kills the
whole tree, but memory and pids are not bounded (see README).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field

from .kernelfiles import write_control

V1_DIR = "roboz-sandbox"
V2_PREFIX = "run-"


def _read(path: str) -> str:
    # os-level: several of these per run, and a text file object costs an fstat, an ioctl and
    # two lseeks per open on top of the read.
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "surrogateescape")


def _keyed(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def _own_cgroups() -> dict[str, str]:
    """controller -> own path (v1 entries by controller name, v2 under the key '')."""
    out: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in _read("/proc/self/cgroup").splitlines():
            _, ctrls, path = line.split(":", 2)
            for ctrl in ctrls.split(",") if ctrls else [""]:
                out[ctrl] = path
    return out


def _v2_mount() -> str | None:
    with contextlib.suppress(OSError):
        for line in _read("/proc/self/mounts").splitlines():
            parts = line.split()
            if len(parts) > 2 and parts[2] == "cgroup2":
                return parts[1]
    return None


def _v1_mount(ctrl: str) -> str | None:
    with contextlib.suppress(OSError):
        for line in _read("/proc/self/mounts").splitlines():
            parts = line.split()
            if len(parts) > 3 and parts[2] == "cgroup" and ctrl in parts[3].split(","):
                return parts[1]
    return None


@dataclass
class Backend:
    version: int  # 1 or 2
    bases: dict[str, str] = field(default_factory=dict)  # v1: ctrl -> base dir; v2: "" -> dir
    memsw: bool = False


_backend: Backend | bool | None = False  # False: not probed yet
_backend_euid = -1


def _probe_v2() -> Backend | None:
    mount = _v2_mount()
    own = _own_cgroups().get("")
    if mount is None or own is None:
        return None
    base = os.path.normpath(mount + own)
    try:
        controllers = _read(os.path.join(base, "cgroup.controllers")).split()
    except OSError:
        return None
    if not {"memory", "pids"} <= set(controllers) or not os.access(base, os.W_OK):
        return None
    try:
        enabled = _read(os.path.join(base, "cgroup.subtree_control")).split()
        if not {"memory", "pids"} <= set(enabled):
            # No processes may live in an inner cgroup: move ours into a leaf first.
            leaf = os.path.join(base, "helper")
            os.makedirs(leaf, exist_ok=True)
            for pid in _read(os.path.join(base, "cgroup.procs")).split():
                with contextlib.suppress(OSError):
                    write_control(os.path.join(leaf, "cgroup.procs"), pid)
            write_control(os.path.join(base, "cgroup.subtree_control"), "+memory +pids")
    except OSError:
        return None
    return Backend(2, {"": base})


def _probe_v1() -> Backend | None:
    own = _own_cgroups()
    bases: dict[str, str] = {}
    for ctrl in ("pids", "memory", "freezer", "cpuacct"):
        mount = _v1_mount(ctrl)
        if mount is None:
            if ctrl == "cpuacct":  # optional: CPU time of killed runs
                continue
            return None
        bases[ctrl] = os.path.normpath(f"{mount}/{own.get(ctrl, '/')}/{V1_DIR}")
    try:
        for base in bases.values():
            os.makedirs(base, exist_ok=True)
    except OSError:
        return None
    memsw = os.path.exists(os.path.join(bases["memory"], "memory.memsw.limit_in_bytes"))
    return Backend(1, bases, memsw)


def backend() -> Backend | None:
    """The hierarchy in use, probed once per effective uid (a helper that drops root probes
    again)."""
    global _backend, _backend_euid
    if _backend is False or _backend_euid != os.geteuid():
        _backend_euid = os.geteuid()
        _backend = (_probe_v2() or _probe_v1()) if os.geteuid() == 0 else _probe_v2()
    return _backend if isinstance(_backend, Backend) else None


@dataclass
class Usage:
    peak_memory_bytes: int = 0
    oom_killed: bool = False
    pids_limited: bool = False
    cpu_s: float = 0.0


def _start_time(pid: int) -> str | None:
    try:
        return _read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


_owner_tag: tuple[int, str] = (0, "")


def owner_tag() -> str:
    """``<pid>@<start time>@``: names a run cgroup after the helper process that made it, so
    that start-up reclamation never touches the runs of another live helper on the host.
    Read once per process (a forked child has its own pid, so it reads its own)."""
    global _owner_tag
    pid = os.getpid()
    if _owner_tag[0] != pid:
        _owner_tag = (pid, f"{pid}@{_start_time(pid)}@")
    return _owner_tag[1]


def _owner_alive(name: str) -> bool:
    parts = name.split("@", 2)
    if len(parts) != 3 or not parts[0].isdigit():
        return False
    return _start_time(int(parts[0])) == parts[1]


class RunCgroup:
    """The cgroup(s) of one run."""

    def __init__(self, be: Backend, name: str) -> None:
        self.be = be
        if be.version == 2:
            self.dirs = {"": os.path.join(be.bases[""], V2_PREFIX + name)}
        else:
            self.dirs = {ctrl: os.path.join(base, name) for ctrl, base in be.bases.items()}

    @classmethod
    def create(cls, name: str, pids_max: int, memory_max: int) -> RunCgroup | None:
        """Make a run's cgroup (named ``<owner tag><run_id>``, see owner_tag) with these
        limits; None without a usable hierarchy."""
        be = backend()
        if be is None:
            return None
        cg = cls(be, name)
        try:
            for d in cg.dirs.values():
                os.mkdir(d, 0o755)
            cg.set_limits(pids_max, memory_max)
        except BaseException:
            cg.remove()
            raise
        return cg

    @classmethod
    def existing(cls, name: str) -> RunCgroup | None:
        be = backend()
        return None if be is None else cls(be, name)

    def set_limits(self, pids_max: int, memory_max: int) -> None:
        if self.be.version == 2:
            d = self.dirs[""]
            write_control(f"{d}/pids.max", str(pids_max))
            write_control(f"{d}/memory.max", str(memory_max))
            with contextlib.suppress(OSError):
                write_control(f"{d}/memory.swap.max", "0")
            with contextlib.suppress(OSError):
                write_control(f"{d}/memory.oom.group", "1")
            return
        write_control(f"{self.dirs['pids']}/pids.max", str(pids_max))
        mem = self.dirs["memory"]
        if self.be.memsw:
            write_control(f"{mem}/memory.memsw.limit_in_bytes", "-1")  # memsw must stay >= limit
        write_control(f"{mem}/memory.limit_in_bytes", str(memory_max))
        if self.be.memsw:
            # memory+swap == memory: the run cannot use swap at all.
            write_control(f"{mem}/memory.memsw.limit_in_bytes", str(memory_max))
        with contextlib.suppress(OSError):
            write_control(f"{mem}/memory.swappiness", "0")

    def rename(self, name: str) -> None:
        """v1 only: give a pooled cgroup (already holding a warm pid 1) the run's name."""
        new = {ctrl: os.path.join(os.path.dirname(d), name) for ctrl, d in self.dirs.items()}
        done: list[str] = []
        try:
            for ctrl, d in self.dirs.items():
                os.rename(d, new[ctrl])
                done.append(ctrl)
        except BaseException:
            for ctrl in done:
                with contextlib.suppress(OSError):
                    os.rename(new[ctrl], self.dirs[ctrl])
            raise
        self.dirs = new

    def open_join_fds(self) -> list[int]:
        """Write-only descriptors through which a process moves itself into the run's
        cgroup(s) by writing "0": v2 ``cgroup.procs``; v1 ``tasks``, which moves the calling
        thread alone and so skips the global threadgroup lock that ``cgroup.procs`` takes --
        whose first writer after a quiet spell waits for an RCU grace period (10-20 ms on an
        idle machine) holding the cgroup lock, stalling every other cgroup change meanwhile.
        Whoever writes is sandbox-init, single-threaded, so its thread is the process."""
        name = "tasks" if self.be.version == 1 else "cgroup.procs"
        return [
            os.open(os.path.join(d, name), os.O_WRONLY | os.O_CLOEXEC) for d in self.dirs.values()
        ]

    def pids(self) -> list[int]:
        """The processes in the run's cgroup(s)."""
        out: set[int] = set()
        for d in self.dirs.values():
            with contextlib.suppress(OSError):
                out.update(int(p) for p in _read(os.path.join(d, "cgroup.procs")).split())
        return sorted(out)

    def tasks(self) -> int | None:
        """How many tasks the pids controller counts in the cgroup (zombies not yet reaped
        included), None when it cannot be read. A counter, where listing cgroup.procs makes a
        v1 kernel build, sort and cache a list of pids (and schedule its destruction)."""
        d = self.dirs["pids"] if self.be.version == 1 else self.dirs[""]
        try:
            return int(_read(os.path.join(d, "pids.current")))
        except (OSError, ValueError):
            return None

    def usage(self) -> Usage:
        u = Usage()
        with contextlib.suppress(OSError, ValueError):
            if self.be.version == 2:
                d = self.dirs[""]
                with contextlib.suppress(OSError):
                    u.peak_memory_bytes = int(_read(f"{d}/memory.peak"))
                u.oom_killed = _keyed(_read(f"{d}/memory.events")).get("oom_kill", 0) > 0
                u.pids_limited = _keyed(_read(f"{d}/pids.events")).get("max", 0) > 0
                u.cpu_s = _keyed(_read(f"{d}/cpu.stat")).get("usage_usec", 0) / 1e6
            else:
                mem = self.dirs["memory"]
                u.peak_memory_bytes = int(_read(f"{mem}/memory.max_usage_in_bytes"))
                oom = _keyed(_read(f"{mem}/memory.oom_control"))
                u.oom_killed = oom.get("oom_kill", 0) > 0
                if "oom_kill" not in oom:  # old kernels: fall back to the failure counter
                    u.oom_killed = int(_read(f"{mem}/memory.failcnt")) > 0
                pev = _keyed(_read(f"{self.dirs['pids']}/pids.events"))
                u.pids_limited = pev.get("max", 0) > 0
                if "cpuacct" in self.dirs:
                    u.cpu_s = int(_read(f"{self.dirs['cpuacct']}/cpuacct.usage")) / 1e9
        return u

    def kill_once(self) -> bool:
        """Kill every process of the run; True when the cgroup was already empty."""
        if self.be.version == 2:
            d = self.dirs[""]
            try:
                write_control(f"{d}/cgroup.kill", "1")
            except OSError:
                for pid in self.pids():
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
            return not self.pids()
        pids = self.pids()
        if not pids:
            return True
        freezer = self.dirs["freezer"]
        with contextlib.suppress(OSError):
            write_control(f"{freezer}/freezer.state", "FROZEN")
        for pid in self.pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            write_control(f"{freezer}/freezer.state", "THAWED")
        return False

    def kill_all(self, timeout_s: float = 5.0) -> bool:
        """Blocking variant for start-up reclamation; True once empty."""
        deadline = time.monotonic() + timeout_s
        while not self.kill_once():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def remove(self) -> bool:
        ok = True
        for d in self.dirs.values():
            try:
                os.rmdir(d)
            except FileNotFoundError:
                pass
            except OSError:
                ok = False
        return ok


def reclaim_stale(pools_only: bool = False, timeout_s: float = 5.0) -> list[str]:
    """Kill and remove every run cgroup left behind by a helper process that no longer exists
    (runs of other live helpers on the same host are left alone)."""
    be = backend()
    if be is None:
        return []
    names: set[str] = set()
    for base in be.bases.values():
        with contextlib.suppress(OSError):
            for entry in os.scandir(base):
                if not entry.is_dir():
                    continue
                if be.version == 2:
                    if entry.name.startswith(V2_PREFIX):
                        names.add(entry.name[len(V2_PREFIX) :])
                else:
                    names.add(entry.name)
    reclaimed = []
    for name in sorted(names):
        if _owner_alive(name) or (pools_only and "@pool-" not in name):
            continue
        cg = RunCgroup(be, name)
        cg.kill_all(timeout_s)
        if cg.remove():
            reclaimed.append(name)
    return reclaimed
