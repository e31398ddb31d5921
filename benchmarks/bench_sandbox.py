"""Sandbox latency and throughput, side by side with plain fork/exec and bubblewrap.

    sudo .venv/bin/python benchmarks/bench_sandbox.py [--runs 200] [--spaced-runs 50]
                                                      [--concurrency 16]

Request-to-completion latency of /bin/true, median and p95, as ratios against bwrap measured
in the same process and moment (absolute times on shared machines are noise). The
contestants take turns in blocks of 10 runs, so that load from other work on the machine
falls on all of them alike:

- plain      fork/exec/wait of /bin/true (subprocess, empty environment): the floor
- bwrap      /usr/bin/bwrap with a profile equivalent to ours (--unshare-all, read-only
             system binds, tmpfs /tmp, fresh /proc and /dev, workdir bound, --clearenv,
             --new-session, --die-with-parent, caps dropped, unprivileged uid, the sandbox's
             own seccomp filter); bwrap has no cgroup limits or rlimits, which ours add
- direct     ``run_in_sandbox`` on one long-lived asyncio loop (what the daemon does per run)
- daemon     the real helper daemon through ``SafeScriptsClient``, which keeps its
             authorized connection for the next run (request, output and completion frames)
- daemon, new connection   the same with ``reuse_connections=False``: connect and greeting
             included in every run

Back to back, then spaced 50 ms apart (what an agent produces); runs/s with 16 at once (bwrap
as 16 concurrent launches, run_in_sandbox as 16 tasks, the daemon with 16 client threads;
median of alternating rounds) with the machine's CPU per run, and for the daemon where it
goes (helper, zygote, fork server with the sandbox processes, everything else);
where a run_in_sandbox call's time goes (runner.phase_hook); the daemon's idle memory with
its zygote and warm sandbox; what a file policy costs a run's start and how resolving its
masks scales (benchmarks/file_view.py; ``--file-view-only`` runs just that); what a network
allowlist costs a run's start, a 10 MB download and 32 connections at once
(benchmarks/egress.py; ``--egress-only``). Nothing is asserted; needs root.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

try:
    from benchmarks import egress, file_view
except ImportError:  # run as a script: benchmarks/ is on sys.path, not the repository
    import egress  # type: ignore[no-redef]
    import file_view  # type: ignore[no-redef]

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


class Bwrap:
    """bwrap launches of /bin/true with the sandbox's own seccomp filter (``--seccomp``, read
    from a descriptor opened per launch, as bwrap consumes it)."""

    def __init__(self, workdir: str, tmp: Path) -> None:
        from roboz_helper.sandbox import seccomp

        self.filter = tmp / "seccomp.bpf"
        self.filter.write_bytes(seccomp.PROGRAM)
        self.argv = bwrap_argv(workdir)

    def __call__(self) -> None:
        fd = os.open(self.filter, os.O_RDONLY | os.O_CLOEXEC)
        try:
            argv = [self.argv[0], "--seccomp", str(fd), *self.argv[1:]]
            subprocess.run(argv, env={}, stdin=subprocess.DEVNULL, check=True, pass_fds=(fd,))
        finally:
            os.close(fd)


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
# Contestants take turns in blocks of this many runs (back to back inside a block), so that
# load from other work on a shared machine falls on all of them alike.
BLOCK = 10
Timed = Callable[[], object]


def interleaved(
    contestants: dict[str, Timed], runs: int, gap_s: float = 0.0
) -> dict[str, list[float]]:
    """``runs`` timings (ms) per contestant, in alternating blocks of BLOCK runs."""
    times: dict[str, list[float]] = {name: [] for name in contestants}
    for fn in contestants.values():
        for _ in range(3):
            fn()
    done = 0
    while done < runs:
        n = min(BLOCK, runs - done)
        for name, fn in contestants.items():
            settle = getattr(fn, "settle", None)
            if settle is not None:
                settle()
            times[name] += measure(fn, n, warmup=0, gap_s=gap_s)
        done += n
    return times


class Direct:
    """``run_in_sandbox`` on one long-lived event loop (as in the daemon), with the time of
    each phase of the last run (see runner.phase_hook)."""

    def __init__(self, workdir: str) -> None:
        from roboz_helper.sandbox import run_in_sandbox, runner

        self.run_in_sandbox = run_in_sandbox
        self.workdir = workdir
        self.loop = asyncio.new_event_loop()
        self.counter = iter(range(10**9))
        # run_id -> phase -> time.monotonic(); filled from the loop and the cleanup threads
        self.marks: dict[str, dict[str, float]] = {}
        self.timed: list[str] = []
        runner.phase_hook = self._mark

    def _mark(self, run_id: str, name: str, at: float) -> None:
        self.marks.setdefault(run_id, {}).setdefault(name, at)

    async def one(self, run_id: str | None = None) -> None:
        spec = direct_spec(self.workdir, run_id or f"bench-{next(self.counter)}")
        outcome = await self.run_in_sandbox(spec, _noop)
        assert outcome.status == "success", outcome

    def __call__(self) -> None:
        run_id = f"bench-{next(self.counter)}"
        self._mark(run_id, "request", time.monotonic())
        self.loop.run_until_complete(self.one(run_id))
        self._mark(run_id, "done", time.monotonic())
        self.timed.append(run_id)

    def phases(self) -> dict[str, list[float]]:
        """phase -> ms after the request, over the timed runs so far."""
        out: dict[str, list[float]] = {}
        for run_id in self.timed:
            marks = self.marks.get(run_id, {})
            for name, at in marks.items():
                out.setdefault(name, []).append((at - marks["request"]) * 1000)
        return out

    def rate(self, concurrency: int, runs: int) -> float:
        per_task = max(1, runs // concurrency)

        async def worker() -> None:
            for _ in range(per_task):
                await self.one()

        async def main() -> None:
            await asyncio.gather(*(worker() for _ in range(concurrency)))

        t0 = time.perf_counter()
        self.loop.run_until_complete(main())
        return per_task * concurrency / (time.perf_counter() - t0)

    def settle(self) -> None:
        """Untimed, before a block: the clean-up of the last runs (pid 1's exit, the cgroup's
        removal), which the daemon's loop does while the other contestants run, and which
        this loop, run only inside the calls, would otherwise leave to the next timed one."""
        self.loop.run_until_complete(asyncio.gather(*asyncio.all_tasks(self.loop)))

    def close(self) -> None:
        self.settle()
        self.loop.run_until_complete(self.loop.shutdown_default_executor())
        self.loop.close()


def threaded_rate(fn: Timed, concurrency: int, runs: int) -> float:
    """runs/s of ``fn`` called from ``concurrency`` threads at once."""
    per_thread = max(1, runs // concurrency)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(per_thread):
                fn()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rate = per_thread * concurrency / (time.perf_counter() - t0)
    if errors:
        print(f"concurrent runs failed: {errors[0]!r}", file=sys.stderr)
    return rate


# Runs/s at once are measured in alternating rounds (load from other work falls on all
# contestants alike), each round long enough to see past thread start-up.
RATE_ROUNDS = 3
RATE_RUNS = 480
_HZ = os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """CPU time the whole machine spent busy (all CPUs, every process and the kernel)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / _HZ  # minus idle and iowait


def process_cpu_s(pid: int) -> float:
    """CPU time of a live process and of the children it has reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in stat[11:15]) / _HZ


def _daemon_parts(daemon_pid: int) -> dict[str, int]:
    """The daemon's processes by role: the helper, its zygote, the fork server (which reaps
    every pid 1, so its children's time is the sandbox processes')."""
    parts = {"helper": daemon_pid}
    for pid in descendants(daemon_pid)[1:]:
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm == "sandbox-forker":
            parts["fork server and sandbox processes"] = pid
        elif comm.startswith("python"):
            parts["zygote"] = pid
    return parts


def concurrent_rates(
    rated: dict[str, Callable[[], float]], daemon_pid: int | None
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Median runs/s of each contestant, and CPU per run (ms): the whole machine's, and for the
    daemon where it went."""
    rates: dict[str, list[float]] = {name: [] for name in rated}
    cpu: dict[str, list[dict[str, float]]] = {name: [] for name in rated}
    for _ in range(RATE_ROUNDS):
        for name, measure_rate in rated.items():
            parts = _daemon_parts(daemon_pid) if daemon_pid and "daemon" in name else {}
            before = {role: process_cpu_s(pid) for role, pid in parts.items()}
            busy, t0 = machine_busy_s(), time.perf_counter()
            rate = measure_rate()
            runs = rate * (time.perf_counter() - t0)
            per_run = {"total": (machine_busy_s() - busy) / runs * 1000}
            for role, pid in parts.items():
                per_run[role] = (process_cpu_s(pid) - before[role]) / runs * 1000
            if parts:
                per_run["everything else (client, kernel threads)"] = per_run["total"] - sum(
                    v for k, v in per_run.items() if k != "total"
                )
            rates[name].append(rate)
            cpu[name].append(per_run)
    medians = {name: statistics.median(values) for name, values in rates.items()}
    ledgers = {
        name: {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
        for name, rounds in cpu.items()
    }
    return medians, ledgers


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


@contextlib.contextmanager
def daemon_client(
    tmp: Path, workdir: str, concurrency: int
) -> Iterator[tuple[Timed, Timed, int] | None]:
    """The real helper daemon and ``SafeScriptsClient`` calls running /bin/true through it, on
    a kept connection and on a new connection each, with the daemon's pid."""
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
                yield None
                return
            time.sleep(0.05)
        kept = SafeScriptsClient(socket_path)
        fresh = SafeScriptsClient(socket_path, reuse_connections=False)

        def one() -> None:
            result = kept.exec_command(["/bin/true"])
            assert result.status == "success", result

        def one_fresh() -> None:
            result = fresh.exec_command(["/bin/true"])
            assert result.status == "success", result

        one()
        one_fresh()
        yield one, one_fresh, daemon.pid
    finally:
        daemon.terminate()
        daemon.wait(10)


def idle_memory(pid: int) -> tuple[int, int, int]:
    """(daemon RSS KiB, PSS KiB of the daemon and all its descendants, how many processes),
    once the pool has had time to fill."""
    time.sleep(0.5)
    family = descendants(pid)
    return rss_kib(pid), pss_kib(family), len(family)


def breakdown(phases: dict[str, list[float]]) -> list[tuple[str, float]]:
    """Median duration of each phase of a run_in_sandbox call (ms)."""
    med = {name: statistics.median(values) for name, values in phases.items() if values}
    if not {"started", "exited", "done"} <= med.keys():
        return []
    rows = [("hand-over (request -> prepared pid 1 has the plan)", med["started"])]
    if "output_closed" in med:
        rows += [
            ("exec, run and exit (until the run's output closes)",
             med["output_closed"] - med["started"]),
            ("reaped by pid 1 and reported", med["exited"] - med["output_closed"]),
        ]  # fmt: skip
    else:
        rows.append(("exec, run, exit, reaped by pid 1 and reported",
                     med["exited"] - med["started"]))  # fmt: skip
    rows.append(("completion (cgroup check, usage, outcome)", med["done"] - med["exited"]))
    if "init_exited" in med:
        rows.append(("teardown after the completion (pid 1 exit, namespaces)",
                     med["init_exited"] - med["exited"]))  # fmt: skip
    return rows


def table(title: str, results: dict[str, list[float]]) -> None:
    base = statistics.median(results["bwrap"])
    base95 = percentile(results["bwrap"], 95)
    print(title)
    print(f"{'':18}{'median':>9}{'p95':>9}{'x bwrap':>9}{'p95 x':>8}")
    for name, times in results.items():
        med, p95 = statistics.median(times), percentile(times, 95)
        print(f"{name:18}{med:9.2f}{p95:9.2f}{med / base:9.2f}{p95 / base95:8.2f}")


def main(quick: bool = False) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="back-to-back runs per contestant")
    parser.add_argument("--spaced-runs", type=int, default=SPACED_RUNS,
                        help=f"runs {SPACED_GAP_S * 1000:.0f} ms apart per contestant")  # fmt: skip
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--file-view-only", action="store_true",
                        help="only the file-policy figures (start ratio, mask resolution)")  # fmt: skip
    parser.add_argument("--egress-only", action="store_true",
                        help="only the network allowlist figures (start ratio, 10 MB over "
                        "HTTPS through the proxy, 32 connections in one run)")  # fmt: skip
    args = parser.parse_args()
    rate_runs = max(args.runs, RATE_RUNS)
    if quick:  # python -m benchmarks --quick: a smoke run
        args.runs, args.spaced_runs = min(args.runs, 40), min(args.spaced_runs, 10)
        rate_runs = args.runs
    if os.geteuid() != 0:
        print("needs root (the helper runs as root)", file=sys.stderr)
        return 1
    sys.path.insert(0, str(REPO / "helper"))
    sizes = (1_000, 10_000) if quick else (1_000, 10_000, 100_000)
    if args.egress_only:
        egress.report(args.runs, interleaved, quick)
        return 0
    if args.file_view_only:
        with tempfile.TemporaryDirectory(prefix="roboz-bench-", dir="/var/tmp") as tmpdir:
            os.chmod(tmpdir, 0o755)
            file_view.report(Path(tmpdir), args.runs, interleaved, sizes)
        return 0
    with tempfile.TemporaryDirectory(prefix="roboz-bench-") as tmpdir:
        tmp = Path(tmpdir)
        workdir = tmp / "work"
        workdir.mkdir()
        os.chmod(tmp, 0o755)
        direct = Direct(str(workdir))
        with daemon_client(tmp, str(workdir), args.concurrency) as daemon:
            contestants: dict[str, Timed] = {
                "plain fork/exec": lambda: spawn(["/bin/true"]),
                "bwrap": Bwrap(str(workdir), tmp),
                "run_in_sandbox": direct,
            }
            if daemon is not None:
                contestants["daemon+client"] = daemon[0]
                contestants["daemon, new conn"] = daemon[1]
                memory = idle_memory(daemon[2])
            back_to_back = interleaved(contestants, args.runs)
            phases = direct.phases()
            spaced = interleaved(contestants, args.spaced_runs, gap_s=SPACED_GAP_S)
            rated: dict[str, Callable[[], float]] = {
                "bwrap, concurrent launches": lambda: threaded_rate(
                    contestants["bwrap"], args.concurrency, rate_runs
                ),
                "run_in_sandbox, concurrent tasks": lambda: direct.rate(
                    args.concurrency, rate_runs
                ),
            }
            if daemon is not None:
                rated["daemon, concurrent clients"] = lambda: threaded_rate(
                    daemon[0], args.concurrency, rate_runs
                )
                rated["daemon, new connection each"] = lambda: threaded_rate(
                    daemon[1], args.concurrency, rate_runs
                )
            rates, cpu = concurrent_rates(rated, daemon[2] if daemon is not None else None)
        direct.close()
    table(f"/bin/true request-to-completion, {args.runs} runs each, back to back in "
          f"alternating blocks of {BLOCK} (ms; ratio vs bwrap)", back_to_back)  # fmt: skip
    table(f"spaced {SPACED_GAP_S * 1000:.0f} ms apart, {args.spaced_runs} runs each", spaced)
    print(f"{args.concurrency} at once (runs/s, median of {RATE_ROUNDS} alternating rounds of "
          f"{rate_runs} runs; CPU per run of the whole machine):")  # fmt: skip
    bwrap_rate = rates["bwrap, concurrent launches"]
    for name, rate in rates.items():
        print(f"  {name:34}{rate:7.0f}  x bwrap {rate / bwrap_rate:5.2f}"
              f"   CPU {cpu[name]['total']:5.2f} ms")  # fmt: skip
    ledger = cpu.get("daemon, concurrent clients")
    if ledger:
        parts = ", ".join(f"{k} {v:.2f}" for k, v in ledger.items() if k != "total")
        print(f"  where a daemon run's CPU goes (ms): {parts}")
    rows = breakdown(phases)
    if rows:
        print("where a back-to-back run_in_sandbox call goes (median ms):")
        for name, ms in rows:
            print(f"  {name:58}{ms:6.2f}")
        floor = statistics.median(back_to_back["plain fork/exec"])
        print(f"  {'(floor: plain fork/exec/wait of /bin/true)':58}{floor:6.2f}")
        if daemon is not None:
            extra = statistics.median(back_to_back["daemon+client"]) - statistics.median(
                back_to_back["run_in_sandbox"]
            )
            print(f"  {'daemon + client on top (kept connection: frames)':58}{extra:6.2f}")
            extra = statistics.median(back_to_back["daemon, new conn"]) - statistics.median(
                back_to_back["run_in_sandbox"]
            )
            print(f"  {'daemon + client, new connection (connect, greeting)':58}{extra:6.2f}")
    if daemon is not None:
        rss, pss, count = memory
        print(f"daemon idle RSS: {rss / 1024:.1f} MiB; with its zygote and warm sandbox "
              f"({count} processes) PSS {pss / 1024:.1f} MiB")  # fmt: skip
    else:
        print("daemon: did not start; skipped")
    with tempfile.TemporaryDirectory(prefix="roboz-bench-", dir="/var/tmp") as tmpdir:
        os.chmod(tmpdir, 0o755)
        file_view.report(Path(tmpdir), args.runs, interleaved, sizes)
    egress.report(args.runs, interleaved, quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
