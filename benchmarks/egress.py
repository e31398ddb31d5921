"""bench_sandbox's egress figures: what a network allowlist costs a run, in the test network
of tests/egress/netlab.py (namespaces made here; nothing leaves the machine).

- Start: ``run_in_sandbox`` of /bin/true back to back in alternating blocks, ``network =
  "none"`` against a run with an allowlist (its pid 1 makes the proxy's listener, the helper
  takes it and serves it, and closes the session at the end). Target: median <= 1.2x.
- 10 MB over HTTPS from ``openssl s_server`` in the remote namespace: curl in a run of the
  real daemon, through the proxy, against the same curl from the daemon's own namespace,
  which has a route (curl's own ``time_total``, in turns). Target: median <= 1.2x. In the
  same turns, the floor of any relay in user space: the same routed curl through
  egress_forwarder.c (a plain TCP forwarder, no handshake and no checks, built here if a C
  compiler exists): what is left between it and the direct download is the extra hop, which
  the proxy cannot avoid; what is left between the proxy and it is the proxy's own.
- 32 connections at once in one run (curl --parallel, 32 x 1 MB over HTTPS from the same
  server): every transfer completes; wall time against the same from the routed namespace.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

RUN_UID = 65534
BIG = 10 << 20
PARALLEL = 32
# The host the downloads come from: openssl s_server on port 443 of its own address (the
# Python servers of the test network hold the others), so the proxy's SNI check is on the path.
SERVER_NAME = "bench.remote.test"
SERVER_ADDRESS = "11.0.7.4"


def _spec(workdir: str, run_id: str, network: str, env: dict[str, str]):  # type: ignore[no-untyped-def]
    from roboz_helper.sandbox import SandboxSpec

    return SandboxSpec(
        argv=["/bin/true"], script_fd=None, uid=RUN_UID, gid=RUN_UID, workdir=workdir,
        readonly_paths=(), writable_paths=(), network=network,  # type: ignore[arg-type]
        env={"PATH": "/usr/bin:/bin", **env}, timeout_s=10.0, max_output_bytes=1 << 20,
        pids_max=64, memory_max_bytes=256 << 20, tmp_size_bytes=64 << 20,
        max_file_bytes=64 << 20, nofile_max=256, cpu_time_s=10, run_id=run_id,
    )  # fmt: skip


async def _noop(stream: int, data: bytes) -> None:
    return None


class _Start:
    """One contestant of the start figure: run_in_sandbox on a long-lived loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, workdir: str, allowlist: bool) -> None:
        from roboz_helper.egress.allowlist import parse_allowlist
        from roboz_helper.egress.endpoint import proxy_environment
        from roboz_helper.egress.proxy import EgressSession
        from roboz_helper.egress.resolver import SystemResolver
        from roboz_helper.sandbox import run_in_sandbox

        self.loop, self.workdir, self.allowlist = loop, workdir, allowlist
        self.run_in_sandbox = run_in_sandbox
        self.session = EgressSession
        self.entries = parse_allowlist(["pypi.org:443"])[0]
        self.resolver = SystemResolver()
        self.env = proxy_environment() if allowlist else {}
        self.counter = iter(range(10**9))

    async def one(self) -> None:
        run_id = f"bench-egress-{os.getpid()}-{next(self.counter)}"
        network = "proxy" if self.allowlist else "none"
        session = self.session(self.entries, self.resolver, "bench") if self.allowlist else None
        spec = _spec(self.workdir, run_id, network, self.env)
        outcome = await self.run_in_sandbox(spec, _noop, session)
        assert outcome.status == "success", outcome

    def __call__(self) -> None:
        self.loop.run_until_complete(self.one())

    def settle(self) -> None:
        """Untimed, before a block: the clean-up left by the last runs (see bench_sandbox)."""
        self.loop.run_until_complete(_drain())


async def _drain() -> None:
    await asyncio.gather(*(asyncio.all_tasks() - {asyncio.current_task()}))


def _start_figures(runs: int, interleaved: Callable[..., dict[str, list[float]]]) -> None:
    with tempfile.TemporaryDirectory(prefix="roboz-bench-egress-") as tmpdir:
        os.chmod(tmpdir, 0o755)
        workdir = Path(tmpdir) / "work"
        workdir.mkdir()
        loop = asyncio.new_event_loop()
        try:
            times = interleaved(
                {"network none": _Start(loop, str(workdir), False),
                 "allowlist": _Start(loop, str(workdir), True)}, runs)  # fmt: skip
        finally:
            loop.run_until_complete(_drain())
            loop.close()
    base = statistics.median(times["network none"])
    print(f"run start with an allowlist, /bin/true, {runs} runs each, back to back in "
          "alternating blocks (ms; target <= 1.2x):")  # fmt: skip
    for name, values in times.items():
        med = statistics.median(values)
        print(f"  {name:16}{med:8.2f}  x none {med / base:5.2f}")


def _serve_files(lab, directory: Path) -> subprocess.Popen[bytes]:  # type: ignore[no-untyped-def]
    (directory / "big").write_bytes(os.urandom(BIG))
    (directory / "small").write_bytes(os.urandom(1 << 20))
    lab.remote.ip("addr", "add", f"{SERVER_ADDRESS}/24", "dev", "eth0")
    cert = lab.ca.issue("bench", [SERVER_NAME])
    server = subprocess.Popen(
        ["ip", "netns", "exec", lab.remote.name, "openssl", "s_server", "-quiet", "-WWW",
         "-accept", f"{SERVER_ADDRESS}:443", "-cert", str(cert.cert), "-key", str(cert.key)],
        cwd=directory, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 10
    while (
        subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                lab.remote.name,
                "ss",
                "-ltn",
                f"sport = :443 and src {SERVER_ADDRESS}",
            ],
            capture_output=True,
            text=True,
        ).stdout.count("LISTEN")
        == 0
    ):
        if time.monotonic() > deadline:
            raise RuntimeError("openssl s_server did not start")
        time.sleep(0.05)
    return server


RESOLVE = f"--resolve {SERVER_NAME}:443:{SERVER_ADDRESS}"


def _direct(lab, argv: list[str]) -> str:  # type: ignore[no-untyped-def]
    """Run argv in the daemon's own namespace, which has a route to the remote host (and
    no resolver: curl is told the address with --resolve)."""
    env = {"PATH": "/usr/bin:/bin", "SSL_CERT_FILE": str(lab.ca.path)}
    out = subprocess.run(["nsenter", f"--net=/run/netns/{lab.world.name}", *argv], env=env,
                         capture_output=True, text=True, check=True)  # fmt: skip
    return out.stdout


def _proxied(helper, argv: list[str]) -> str:  # type: ignore[no-untyped-def]
    result = helper.run(*argv)
    assert result.ok, result
    return str(result.stdout)


def _forwarder(lab, directory: Path) -> tuple[subprocess.Popen[str], int] | None:  # type: ignore[no-untyped-def]
    """The floor: egress_forwarder.c, built here, listening in the routed namespace and
    relaying to the server; None (and why) without a C compiler."""
    from benchmarks.native import build  # the repository is on sys.path by now

    binary = build("egress_forwarder", directory)
    if isinstance(binary, str):
        print(f"  ({binary}: no plain forwarder to compare with)")
        return None
    proc = subprocess.Popen(
        ["nsenter", f"--net=/run/netns/{lab.world.name}", str(binary), SERVER_ADDRESS, "443"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def _download_figures(runs: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script, too
    from tests.egress.helperd import running_helper
    from tests.egress.netlab import NAMES, Lab

    NAMES[SERVER_NAME] = [("A", SERVER_ADDRESS)]
    with tempfile.TemporaryDirectory(prefix="roboz-bench-egress-") as tmpdir:
        lab = Lab(Path(tmpdir))
        server = forwarder = None
        try:
            server = _serve_files(lab, Path(tmpdir))
            forwarder = _forwarder(lab, Path(tmpdir))
            with running_helper(lab, f'["{SERVER_NAME}:443"]', label="bench-egress") as helper:
                curl = ["/usr/bin/curl", "-sS", "--fail", "-o", "/dev/null", "-w",
                        "%{time_total}", f"https://{SERVER_NAME}/big"]  # fmt: skip
                direct_curl = [curl[0], *RESOLVE.split(), *curl[1:]]
                contestants: dict[str, Callable[[], str]] = {
                    "direct": lambda: _direct(lab, direct_curl),
                    "proxy": lambda: _proxied(helper, curl),
                }
                if forwarder is not None:
                    via_floor = [curl[0], "--connect-to",
                                 f"{SERVER_NAME}:443:127.0.0.1:{forwarder[1]}", *curl[1:]]  # fmt: skip
                    contestants["floor"] = lambda: _direct(lab, via_floor)
                for _ in range(2):  # warm-up: the zygote's pool, the server's first accept
                    for measure in contestants.values():
                        measure()
                times: dict[str, list[float]] = {name: [] for name in contestants}
                names = list(contestants)
                for i in range(runs):  # each takes every place in the order in turn
                    for name in names[i % len(names) :] + names[: i % len(names)]:
                        times[name].append(float(contestants[name]()) * 1000)
                base = statistics.median(times["direct"])
                print(f"10 MB over HTTPS, curl's time_total, {runs} each, in turns "
                      "(ms; target <= 1.2x):")  # fmt: skip
                print(f"  {'direct from a namespace with a route':36} {base:8.1f}")
                rows = {"proxy": "through the proxy, in a run",
                        "floor": "through a plain forwarder (floor)"}  # fmt: skip
                for name in names[1:]:
                    med = statistics.median(times[name])
                    print(f"  {rows[name]:36} {med:8.1f}  x direct {med / base:5.2f}")
                urls = " ".join(f"https://{SERVER_NAME}/small" for _ in range(PARALLEL))
                parallel = ("/bin/sh", "-c", "s=$(date +%s%N); curl -sS --fail --parallel "
                            f"--parallel-max {PARALLEL} -o /dev/null {urls.replace(' ', ' -o /dev/null ')}"
                            " -w '%{http_code}\\n' | grep -c 200; e=$(date +%s%N); "
                            "echo $(( (e - s) / 1000000 ))")  # fmt: skip
                walls_via, walls_direct, done = [], [], []
                for _ in range(max(3, runs // 4)):
                    count, ms = _proxied(helper, list(parallel)).split()
                    done.append(int(count))
                    walls_via.append(float(ms))
                    out = _direct(
                        lab, ["/bin/sh", "-c", parallel[2].replace("curl ", f"curl {RESOLVE} ")]
                    )
                    walls_direct.append(float(out.split()[1]))
                print(f"{PARALLEL} connections at once in one run (1 MB each, wall ms, median):"
                      f" completed {min(done)}/{PARALLEL} in every round; through the proxy "
                      f"{statistics.median(walls_via):.0f}, direct "
                      f"{statistics.median(walls_direct):.0f}")  # fmt: skip
        finally:
            if forwarder is not None:
                forwarder[0].terminate()
                forwarder[0].wait()
            if server is not None:
                server.kill()
                server.wait()
            lab.close()


def report(runs: int, interleaved: Callable[..., dict[str, list[float]]], quick: bool) -> None:
    _start_figures(runs, interleaved)
    _download_figures(6 if quick else 20)
