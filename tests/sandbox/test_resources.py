"""Resource attacks (issue 5, items 5 and 7): each is stopped, reported, and leaves nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

from roboz_helper.sandbox import cgroups, reclaim_stale_runs, run_in_sandbox

from .conftest import Sandbox


def _host_pids_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


def _no_run_cgroups_left() -> bool:
    be = cgroups.backend()
    assert be is not None
    tag = cgroups.owner_tag()
    return all(
        not any(name.startswith(tag) or name.startswith("run-" + tag) for name in os.listdir(b))
        for b in be.bases.values()
    )


def test_fork_bomb_hits_the_pids_limit(sandbox: Sandbox) -> None:
    r = sandbox.py(
        """
        import os, time
        children = 0
        try:
            while True:
                if os.fork() == 0:
                    time.sleep(30); os._exit(0)
                children += 1
        except OSError as e:
            print("fork failed after", children, e.errno)
            raise SystemExit(1)
        """,
        pids_max=16,
    )
    assert r.outcome.status == "failed" and r.outcome.limit == "pids", r
    assert "fork failed after" in r.out and int(r.out.split()[3]) < 16
    assert "process limit" in r.outcome.diagnostic
    assert _no_run_cgroups_left()


def test_memory_hog_is_oom_killed_and_reported(sandbox: Sandbox) -> None:
    r = sandbox.py(
        """
        chunks = []
        while True:
            chunks.append(bytearray(8 << 20))
        """,
        memory_max_bytes=64 << 20,
    )
    assert r.outcome.status == "killed" and r.outcome.signal == 9, r
    assert r.outcome.limit == "memory"
    assert r.outcome.peak_memory_bytes >= 32 << 20
    assert r.outcome.peak_memory_bytes <= 64 << 20


def test_memory_in_tmpfs_counts_too(sandbox: Sandbox) -> None:
    """Filling /tmp (memory-backed) cannot exceed the memory limit either."""
    r = sandbox.sh(
        "head -c 100M /dev/zero > /tmp/fill; echo rc=$?",
        memory_max_bytes=32 << 20,
        tmp_size_bytes=200 << 20,
    )
    assert r.out.strip() != "rc=0" or r.outcome.limit == "memory", r


def test_cpu_time_limit(sandbox: Sandbox) -> None:
    r = sandbox.py("while True: pass\n", cpu_time_s=1, timeout_s=10)
    # The soft limit fired (SIGXCPU), not the hard one a second later, nor the timeout.
    assert r.outcome.status == "killed" and r.outcome.signal == signal.SIGXCPU, r
    assert r.outcome.limit == "cpu"
    # The kernel checks RLIMIT_CPU against the process's tick-sampled CPU time (each tick bills
    # a whole 1/HZ to the task that is current), while the reported figure is the precise run
    # time (wait4 rusage and cpuacct, which agree). A busy loop sharing a core is billed for
    # ticks it ran only part of, so SIGXCPU comes at 0.77-0.99 s of precise time (0.87-0.99 s
    # alone; the same outside any sandbox: fork, setrlimit, exec). Half the limit still tells
    # a real limit of 1 s from one applied to the wrong process or in the wrong unit, and the
    # process must not have run past the hard limit (2 s).
    assert 0.5 <= r.outcome.cpu_time_s < 2.0, r


def test_cpu_time_hard_limit_kills_a_run_ignoring_sigxcpu(sandbox: Sandbox) -> None:
    r = sandbox.py(
        "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True: pass\n",
        cpu_time_s=1,
        timeout_s=10,
    )
    assert r.outcome.status == "killed" and r.outcome.signal == signal.SIGKILL, r
    assert r.outcome.limit == "cpu" and "CPU time limit" in r.outcome.diagnostic
    # Past the soft limit, up to the hard one (2 s of tick-sampled time; see above).
    assert 1.0 <= r.outcome.cpu_time_s < 3.0, r


def test_stdout_flood_is_capped(sandbox: Sandbox) -> None:
    r = sandbox.py("import os\nwhile True: os.write(1, b'x' * 65536)\n", max_output_bytes=300_000)
    assert r.outcome.status == "output_limit" and r.outcome.limit == "output", r
    assert len(r.stdout) + len(r.stderr) == 300_000


def test_stderr_flood_is_capped(sandbox: Sandbox) -> None:
    r = sandbox.sh("yes error >&2", max_output_bytes=50_000)
    assert r.outcome.status == "output_limit", r
    assert len(r.stderr) == 50_000 and r.stdout == b""


def test_timeout_kills_setsid_and_double_forked_grandchildren(sandbox: Sandbox) -> None:
    marker = f"roboz-escapee-{os.getpid()}-{time.monotonic_ns()}"
    r = sandbox.sh(
        f"""
        setsid bash -c 'exec -a {marker}-setsid sleep 60' </dev/null >/dev/null 2>&1 &
        ( ( exec -a {marker}-double sleep 60 ) & ) </dev/null >/dev/null 2>&1
        nohup bash -c 'trap "" HUP TERM; exec -a {marker}-nohup sleep 60' >/dev/null 2>&1 &
        for i in $(seq 100); do
            [ "$(ps -eo args | grep -c '^{marker}')" -ge 3 ] && break; sleep 0.05
        done
        ps -eo args | grep -c '^{marker}'
        sleep 60
        """,
        timeout_s=4,
    )
    assert r.outcome.status == "timeout" and r.outcome.limit == "timeout", r
    assert int(r.out.split()[0]) >= 3  # the escapees were really running
    assert _host_pids_with(marker) == []
    assert _no_run_cgroups_left()


def test_daemon_left_behind_dies_with_the_run(sandbox: Sandbox) -> None:
    marker = f"roboz-daemon-{os.getpid()}-{time.monotonic_ns()}"
    r = sandbox.sh(
        f"setsid bash -c 'exec -a {marker} sleep 60' </dev/null >/dev/null 2>&1 & echo started"
    )
    assert r.outcome.status == "success", r
    assert _host_pids_with(marker) == []


def test_reclaim_stale_runs_removes_only_dead_helpers_cgroups(needs_root: None) -> None:
    be = cgroups.backend()
    assert be is not None
    dead = "999999999@1@stale-run"
    live = cgroups.owner_tag() + "live-run"
    made = []
    for base in be.bases.values():
        for name in (dead, live):
            path = Path(base) / (("run-" + name) if be.version == 2 else name)
            path.mkdir()
            made.append(path)
    try:
        reclaim_stale_runs()
        for path in made:
            assert path.exists() == ("live-run" in path.name), path
    finally:
        for path in made:
            if path.exists():
                path.rmdir()


def test_reclaim_kills_processes_left_in_a_crashed_helpers_cgroup(needs_root: None) -> None:
    """A run cgroup whose helper is gone, still holding a process: start-up reclamation kills
    the process and removes the cgroup."""
    import subprocess

    be = cgroups.backend()
    assert be is not None and be.version == 1  # these machines; v2 has its own cgroup.kill
    cg = cgroups.RunCgroup(be, "999999998@1@orphaned-run")
    for d in cg.dirs.values():
        os.mkdir(d)
    victim = subprocess.Popen(["/bin/sleep", "60"])
    try:
        for d in cg.dirs.values():
            Path(d, "cgroup.procs").write_text(str(victim.pid))
        reclaim_stale_runs()
        assert victim.wait(timeout=5) == -9
        assert all(not os.path.exists(d) for d in cg.dirs.values())
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()
        cg.remove()


def test_a_long_lived_loop_removes_each_runs_cgroup_after_the_outcome(sandbox: Sandbox) -> None:
    """The helper keeps one event loop for its lifetime: each run's (empty) cgroup is removed
    in the background after the outcome is returned, and none accumulate."""

    async def discard(stream: int, data: bytes) -> None:
        return None

    async def runs() -> list[bool]:
        removed = []
        for _ in range(3):
            outcome = await run_in_sandbox(sandbox.spec(), discard)
            assert outcome.status == "success", outcome
            for _ in range(400):  # bounds a hang only; nothing here measures speed
                if _no_run_cgroups_left():
                    break
                await asyncio.sleep(0.025)
            removed.append(_no_run_cgroups_left())
        return removed

    assert asyncio.run(runs()) == [True, True, True]


def _host_pids_named(comm: str) -> list[int]:
    """Processes (zombies included: their /proc entry stays until reaped) with this name."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    name = f.read().split(b"(", 1)[1].rsplit(b")", 1)[0]
            except (OSError, IndexError):
                continue
            if name == comm.encode():
                found.append(int(entry))
    return found


def test_leftovers_are_dead_and_reaped_when_the_completion_arrives(sandbox: Sandbox) -> None:
    """The completion is reported as soon as pid 1 has killed and reaped everything the run
    left behind (it does not wait for the namespaces' teardown): a process that ignores
    SIGTERM/SIGHUP, hidden below a child subreaper and orphaned twice, and slow to die (96 MiB
    to free), is already gone (not
    even a zombie) when run_in_sandbox returns, checked on the same loop before anything else
    runs (asyncio.run would also wait for the background teardown)."""
    comm = f"rz{os.getpid() % 100000}{time.monotonic_ns() % 100000}"[:15]
    script = sandbox.scripts / "leftover.py"
    script.write_text(
        f"""#!/usr/bin/python3
import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
r, w = os.pipe()
if os.fork() == 0:
    if os.fork() == 0:
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(s, signal.SIG_IGN)
        os.setsid()
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)  # detached like a daemon: holds no output pipe open
        libc.prctl(15, b"{comm}", 0, 0, 0)  # PR_SET_NAME
        ballast = b"x" * (96 << 20)  # its exit takes a while: a late kill would be seen
        os.write(w, b"x")
        time.sleep(60)
        os._exit(0)
    os._exit(0)
os.read(r, 1)
os.wait()  # the middle child; the grandchild is now this process's (subreaper)
print("left", flush=True)
"""
    )
    out: list[bytes] = []

    async def collect(stream: int, data: bytes) -> None:
        out.append(data)

    async def discard(stream: int, data: bytes) -> None:
        return None

    async def run() -> tuple[str, list[int]]:
        fd = os.open(script, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if sandbox.warm:
                await run_in_sandbox(sandbox.spec(), discard)
            outcome = await run_in_sandbox(sandbox.spec(argv=["leftover.py"], script_fd=fd),
                                           collect)  # fmt: skip
            return outcome.status, _host_pids_named(comm)
        finally:
            os.close(fd)

    status, left = asyncio.run(run())
    assert status == "success" and b"".join(out) == b"left\n"
    assert left == []
