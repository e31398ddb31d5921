"""bench_sandbox's file-view figures: what a file policy costs a run's start.

- Start: ``run_in_sandbox`` of /bin/true on a 10,000-file project, back to back in
  alternating blocks, without a file policy and with one of 20 deny globs (ratio of medians,
  target <= 1.3x).
- Resolving the masks (``view.plan_view``, what the helper adds per run) on projects of
  1,000 / 10,000 / 100,000 files: with the same matches at every size (the cost should stay
  flat: it grows with the matches and the directories on the way to them), with matches that
  grow with the tree, and with a bare-name rule (``**/.env``), which has to look into every
  directory.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

RUN_UID = 65534
# 20 deny rules anchored at paths (the usual shape: secrets, caches, vendored trees).
ANCHORED = (
    "secrets/**", "private/**", "config/*.key", "config/*.pem", "data/private/**",
    "data/raw/**", ".git/**", ".venv/**", "build/cache/**", "dist/**", "node_modules/**",
    "vendor/keys/**", "ops/credentials/**", "ops/*.env", "db/dumps/**", "logs/**",
    "tmp/**", "certs/**", "backup/**", ".ssh/**",
)  # fmt: skip
MATCHES = ("secrets/api.key", "secrets/db.key", "private/notes.md", "config/site.key",
           "config/tls.pem", "data/private/people.csv", ".git/HEAD", "logs/run.log",
           "ops/prod.env", "certs/ca.crt")  # fmt: skip
FILES_PER_DIR = 50


def make_project(root: Path, files: int, per_package_secret: bool = False) -> None:
    """``files`` ordinary files in pkgN/modM/ directories, plus the fixed MATCHES (and one
    ``pkgN/secret/key`` per package when ``per_package_secret``)."""
    root.mkdir(parents=True)
    made = 0
    package = 0
    while made < files:
        for module in range(10):
            leaf = root / f"pkg{package}" / f"mod{module}"
            leaf.mkdir(parents=True)
            for index in range(min(FILES_PER_DIR, files - made)):
                (leaf / f"f{index}.py").write_bytes(b"x")
                made += 1
            if made >= files:
                break
        if per_package_secret:
            (root / f"pkg{package}" / "secret").mkdir()
            (root / f"pkg{package}" / "secret" / "key").write_bytes(b"k")
        package += 1
    for rel in MATCHES:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"s")
    for dirpath, _dirs, _files in os.walk(root):
        os.chown(dirpath, RUN_UID, RUN_UID)


def policy(root: Path, deny: tuple[str, ...]):  # type: ignore[no-untyped-def]
    from roboz_helper.file_policy import FilePolicy, FileRule

    return FilePolicy(
        base=str(root),
        default="deny",
        allow=(FileRule(pattern="**"),),
        deny=tuple(FileRule(pattern=pattern) for pattern in deny),
    )


def plan_ms(root: Path, deny: tuple[str, ...], runs: int) -> tuple[float, int]:
    """Median ms of resolving the view, and how many entries it has."""
    from roboz_helper.file_policy import FileMatcher
    from roboz_helper.sandbox.view import plan_view

    matcher = FileMatcher(policy(root, deny))
    times = []
    entries = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        entries = len(plan_view([matcher], [(str(root), True)], str(root)))
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), entries


def start_ratio(
    tmp: Path,
    runs: int,
    interleaved: Callable[[dict[str, Callable[[], object]], int], dict[str, list[float]]],
) -> dict[str, list[float]]:
    """Back to back /bin/true on a 10,000-file project, with and without the 20 globs."""
    import asyncio
    from dataclasses import replace

    from roboz_helper.sandbox import SandboxSpec, run_in_sandbox

    root = tmp / "project10k"
    make_project(root, 10_000)
    loop = asyncio.new_event_loop()
    base = SandboxSpec(
        argv=["/bin/true"], script_fd=None, uid=RUN_UID, gid=RUN_UID, workdir=str(root),
        readonly_paths=(), writable_paths=(), network="none", env={"PATH": "/usr/bin:/bin"},
        timeout_s=10.0, max_output_bytes=1 << 20, pids_max=64, memory_max_bytes=256 << 20,
        tmp_size_bytes=64 << 20, max_file_bytes=64 << 20, nofile_max=256, cpu_time_s=10,
        run_id="fv",
    )  # fmt: skip
    counter = iter(range(10**9))
    restricted = (policy(root, ANCHORED),)

    async def noop(stream: int, data: bytes) -> None:
        return None

    def runner(policies: tuple[object, ...]) -> Callable[[], None]:
        def run() -> None:
            spec = replace(base, run_id=f"fv-{next(counter)}", file_policies=policies)
            outcome = loop.run_until_complete(run_in_sandbox(spec, noop))
            assert outcome.status == "success", outcome
            # The clean-up the daemon's loop does between runs, untimed here as there.
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            if pending:
                loop.run_until_complete(asyncio.gather(*pending))

        return run

    try:
        return interleaved(
            {"no file policy": runner(()), "20 deny globs": runner(restricted)}, runs
        )
    finally:
        loop.close()


def report(
    tmp: Path,
    runs: int,
    interleaved: Callable[[dict[str, Callable[[], object]], int], dict[str, list[float]]],
    sizes: tuple[int, ...] = (1_000, 10_000, 100_000),
) -> None:
    times = start_ratio(tmp, runs, interleaved)
    plain = statistics.median(times["no file policy"])
    narrowed = statistics.median(times["20 deny globs"])
    print(f"file view: /bin/true on a 10,000-file project, {runs} runs each, back to back in "
          "alternating blocks (median ms):")  # fmt: skip
    print(f"  no file policy {plain:6.2f}   20 deny globs {narrowed:6.2f}   "
          f"ratio {narrowed / plain:4.2f} (target <= 1.3)")  # fmt: skip
    print("resolving the view (plan_view, median ms of 5; entries = masks and re-binds):")
    print(f"  {'files':>8} {'20 anchored globs':>20} {'+ a secret per package':>24} "
          f"{'+ **/.env':>14}")  # fmt: skip
    for size in sizes:
        fixed = tmp / f"fixed{size}"
        make_project(fixed, size)
        growing = tmp / f"growing{size}"
        make_project(growing, size, per_package_secret=True)
        a, a_n = plan_ms(fixed, ANCHORED, 5)
        b, b_n = plan_ms(growing, (*ANCHORED[:19], "pkg*/secret/**"), 5)
        c, c_n = plan_ms(fixed, (*ANCHORED[:19], "**/.env"), 5)
        print(f"  {size:>8} {a:9.2f} ({a_n:3} entries) {b:11.2f} ({b_n:4} entries) "
              f"{c:9.2f} ({c_n:2})")  # fmt: skip
