"""Sandbox latency and throughput, side by side with plain fork/exec and bubblewrap.

    sudo .venv/bin/python benchmarks/bench_sandbox.py [--runs 200] [--concurrency 16]

Request-to-completion latency of /bin/true, N runs each, median and p95, as ratios against
bwrap measured in the same process and moment (absolute times on shared machines are noise):

- plain      fork/exec/wait of /bin/true (subprocess, empty environment)
- bwrap      /usr/bin/bwrap with a profile equivalent to ours (--unshare-all, read-only
             system binds, tmpfs /tmp, fresh /proc and /dev, workdir bound, --clearenv,
             --new-session, --die-with-parent, caps dropped, unprivileged uid)
- direct     ``run_in_sandbox`` awaited from an asyncio loop (what the daemon does per run)
- daemon     the real helper daemon through ``SafeScriptsClient`` (connect, greeting, exec
             request, output and completion frames included), when helper/server.py exists

Also: the daemon's idle RSS, and runs/s with 16 concurrent clients (daemon) and 16
concurrent tasks (direct). Nothing is asserted; needs root.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BWRAP = "/usr/bin/bwrap"
RUN_UID = 65534


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def measure(
    fn: Callable[[], object], runs: int, warmup: int = 5, gap_s: float = 0.0
) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        if gap_s:
            time.sleep(gap_s)
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return times


def bwrap_argv(workdir: str) -> list[str]:
    argv = [BWRAP, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv"]
    argv += ["--uid", str(RUN_UID), "--gid", str(RUN_UID), "--cap-drop", "ALL"]
    argv += ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for top in ("bin", "sbin", "lib", "lib64"):
        path = Path("/" + top)
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), "/" + top]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    argv += ["--bind", workdir, workdir, "--chdir", workdir, "/bin/true"]
    return argv


def spawn(argv: list[str]) -> None:
    subprocess.run(argv, env={}, stdin=subprocess.DEVNULL, check=True)


def direct_spec(workdir: str, run_id: str):  # type: ignore[no-untyped-def]
    from roboz_helper.sandbox import SandboxSpec

    return SandboxSpec(
        argv=["/bin/true"], script_fd=None, uid=RUN_UID, gid=RUN_UID, workdir=workdir,
        readonly_paths=(), writable_paths=(), network="none", env={"PATH": "/usr/bin:/bin"},
        timeout_s=10.0, max_output_bytes=1 << 20, pids_max=64, memory_max_bytes=256 << 20,
        tmp_size_bytes=64 << 20, max_file_bytes=64 << 20, nofile_max=256, cpu_time_s=10,
        run_id=run_id,
    )  # fmt: skip


async def _noop(stream: int, data: bytes) -> None:
    return None


# Runs spaced this far apart show the latency an agent sees (its runs are seconds apart); the
# machine is idle in between, which makes every contestant slower than back to back.
SPACED_GAP_S = 0.05
SPACED_RUNS = 50


def bench_direct(
    workdir: str, runs: int, concurrency: int
) -> tuple[list[float], float, list[float]]:
    from roboz_helper.sandbox import run_in_sandbox

    counter = iter(range(10**9))

    async def one() -> float:
        t0 = time.perf_counter()
        outcome = await run_in_sandbox(direct_spec(workdir, f"bench-{next(counter)}"), _noop)
        assert outcome.status == "success", outcome
        return (time.perf_counter() - t0) * 1000

    async def spaced() -> float:
        await asyncio.sleep(SPACED_GAP_S)
        return await one()

    async def main() -> tuple[list[float], float, list[float]]:
        for _ in range(5):
            await one()
        times = [await one() for _ in range(runs)]
        spaced_times = [await spaced() for _ in range(SPACED_RUNS)]
        per_task = max(1, runs // concurrency)

        async def worker() -> None:
            for _ in range(per_task):
                await one()

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        rate = per_task * concurrency / (time.perf_counter() - t0)
        return times, rate, spaced_times

    return asyncio.run(main())


def write_policy(tmp: Path, socket_path: str, workdir: str, concurrency: int) -> Path:
    scripts = tmp / "scripts"
    scripts.mkdir()
    policy = tmp / "bench.toml"
    policy.write_text(
        f"""
[server]
socket = "{socket_path}"
max_connections = {concurrency * 4}
max_runs_per_client = {concurrency * 2}
handshake_timeout_s = 5.0

[[clients]]
uid = {os.getuid()}
profile = "bench"

[profiles.bench]
run_as_user = "nobody"
scripts_dir = "{scripts}"
workdir = "{workdir}"
network = "none"
commands = ["/bin/true"]
env = {{ PATH = "/usr/bin:/bin" }}
timeout_s = 10.0
max_output_bytes = 1048576
pids_max = 64
memory_max_bytes = 268435456
tmp_size_bytes = 67108864
max_file_bytes = 67108864
nofile_max = 256
cpu_time_s = 10
"""
    )
    return policy


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def pss_kib(pids: list[int]) -> int:
    """Proportional set size summed over processes (shared pages counted once overall)."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def bench_daemon(
    tmp: Path, workdir: str, runs: int, concurrency: int
) -> tuple[list[float], float, int, int, int] | None:
    if not (REPO / "helper/roboz_helper/server.py").exists():
        return None
    from roboz.shed.safe_scripts import SafeScriptsClient

    socket_path = str(tmp / "helper.sock")
    policy = write_policy(tmp, socket_path, workdir, concurrency)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "roboz_helper", "serve", "--policy", str(policy),
         "--socket", socket_path, "--log-level", "WARNING"],
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 15
        while not os.path.exists(socket_path):
            if daemon.poll() is not None or time.monotonic() > deadline:
                print("daemon did not start", file=sys.stderr)
                return None
            time.sleep(0.05)
        client = SafeScriptsClient(socket_path)

        def one() -> None:
            result = client.exec_command(["/bin/true"])
            assert result.status == "success", result

        time.sleep(0.5)
        one()
        time.sleep(0.5)
        idle = rss_kib(daemon.pid)
        family = descendants(daemon.pid)
        idle_family = pss_kib(family)
        times = measure(one, runs)
        per_client = max(1, runs // concurrency)
        errors: list[BaseException] = []

        def worker() -> None:
            try:
                for _ in range(per_client):
                    one()
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(concurrency)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rate = per_client * concurrency / (time.perf_counter() - t0)
        if errors:
            print(f"concurrent clients failed: {errors[0]!r}", file=sys.stderr)
        return times, rate, idle, idle_family, len(family)
    finally:
        daemon.terminate()
        daemon.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (the helper runs as root)", file=sys.stderr)
        return 1
    sys.path.insert(0, str(REPO / "helper"))
    with tempfile.TemporaryDirectory(prefix="roboz-bench-") as tmpdir:
        tmp = Path(tmpdir)
        workdir = tmp / "work"
        workdir.mkdir()
        os.chmod(tmp, 0o755)
        results: dict[str, list[float]] = {}
        results["plain fork/exec"] = measure(lambda: spawn(["/bin/true"]), args.runs)
        results["bwrap"] = measure(lambda: spawn(bwrap_argv(str(workdir))), args.runs)
        spaced: dict[str, list[float]] = {
            "bwrap": measure(
                lambda: spawn(bwrap_argv(str(workdir))), SPACED_RUNS, gap_s=SPACED_GAP_S
            )
        }
        direct, direct_rate, spaced["run_in_sandbox"] = bench_direct(
            str(workdir), args.runs, args.concurrency
        )
        results["run_in_sandbox"] = direct
        daemon = bench_daemon(tmp, str(workdir), args.runs, args.concurrency)
        if daemon is not None:
            results["daemon+client"] = daemon[0]
    base = statistics.median(results["bwrap"])
    base95 = percentile(results["bwrap"], 95)
    print(f"/bin/true request-to-completion, {args.runs} runs each (ms; ratio vs bwrap)")
    print(f"{'':18}{'median':>9}{'p95':>9}{'x bwrap':>9}{'p95 x':>8}")
    for name, times in results.items():
        med, p95 = statistics.median(times), percentile(times, 95)
        print(f"{name:18}{med:9.2f}{p95:9.2f}{med / base:9.2f}{p95 / base95:8.2f}")
    spaced_base = statistics.median(spaced["bwrap"])
    print(
        f"spaced {SPACED_GAP_S * 1000:.0f} ms apart, {SPACED_RUNS} runs each (ms; ratio vs bwrap)"
    )
    for name, times in spaced.items():
        med = statistics.median(times)
        print(f"{name:18}{med:9.2f}{percentile(times, 95):9.2f}{med / spaced_base:9.2f}")
    print(f"run_in_sandbox, {args.concurrency} concurrent tasks: {direct_rate:.0f} runs/s")
    if daemon is not None:
        print(f"daemon, {args.concurrency} concurrent clients: {daemon[1]:.0f} runs/s")
        print(f"daemon idle RSS: {daemon[2] / 1024:.1f} MiB; with its zygote and warm sandbox "
              f"({daemon[4]} processes) PSS {daemon[3] / 1024:.1f} MiB")  # fmt: skip
    else:
        print("daemon: helper/roboz_helper/server.py not found or did not start; skipped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
