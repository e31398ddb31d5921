"""Guarded files beside their baselines, measured in the same run.

Run: .venv/bin/python benchmarks/bench_files.py

- policy decisions/s: 48 rules x 100,000 paths, compiled PermissionPolicy vs a stdlib fnmatch
  loop over the same rules (target >= 500,000 decisions/s);
- cat of a small file, grep -r over 2,000 files, find over 10,000 files: run_file_command vs
  the same native command run with subprocess (target: total <= 2x native for the recursive
  ones);
- apply_patch: one replacement in a 10 MB file vs plain read + replace + write (target <= 1.2x);
  refusing an ambiguous old_string of 100,000 ``a`` in a file of 200,000 ``a`` (every offset
  matches, overlapping) vs one plain ``bytes.find`` of it (target: a small constant factor,
  not the quadratic listing of every overlapping match).
"""

from __future__ import annotations

import fnmatch
import os
import random
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from roboz.shed.files import FileCommandEngine, Tag
from roboz.shed.models import ActionVerdict, Operation, PermissionRule
from roboz.shed.patch import PatchError, apply_patch
from roboz.shed.sandbox import PermissionPolicy


def median_time(func: Callable[[], object], repeat: int) -> float:
    func()  # warm up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def paired(
    ours: Callable[[], object], baseline: Callable[[], object], repeat: int
) -> tuple[float, float]:
    """Medians of both, measured alternately so load changes hit both sides alike."""
    ours()
    baseline()
    ours_times, base_times = [], []
    for _ in range(repeat):
        for func, times in ((ours, ours_times), (baseline, base_times)):
            start = time.perf_counter()
            func()
            times.append(time.perf_counter() - start)
    return statistics.median(ours_times), statistics.median(base_times)


def row(label: str, ours: float, baseline: float, unit: str = "ms") -> None:
    factor = 1000 if unit == "ms" else 1
    print(
        f"{label:<44} {ours * factor:>10.2f} {unit}  native {baseline * factor:>9.2f} {unit}"
        f"  ratio {ours / baseline:>5.2f}x"
    )


def bench_policy() -> None:
    base = "/srv/work"
    rng = random.Random(1)
    words = ["src", "docs", "notes", "build", "tmp", "cache", "data", "lib", "test", "app"]
    exts = ["py", "md", "txt", "json", "key", "log", "csv", "toml"]
    rules: dict[str, list[str]] = {"allow": [], "deny": [], "ask": []}
    kinds = list(rules)
    for index in range(48):
        shape = index % 4
        a, b = rng.choice(words), rng.choice(words)
        ext = rng.choice(exts)
        pattern = [f"{a}/**", f"{a}/{b}/*.{ext}", f"**/*.{ext}", f"{a}/*/{b}/**"][shape]
        rules[kinds[index % 3]].append(pattern)
    policy = PermissionPolicy(
        base=Path(base),
        default_verdict=ActionVerdict.deny,
        allow=tuple(PermissionRule(pattern=p) for p in rules["allow"]),
        deny=tuple(PermissionRule(pattern=p) for p in rules["deny"]),
        ask=tuple(PermissionRule(pattern=p) for p in rules["ask"]),
    )
    paths = [
        base
        + "/"
        + "/".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
        + f"/f{i}.{rng.choice(exts)}"
        for i in range(100_000)
    ]
    compiled = [
        (kind, f"{base}/{p}".replace("/**/", "/*/").removesuffix("/**") + "*")
        for kind in ("deny", "ask", "allow")
        for p in rules[kind]
    ]

    def ours() -> None:
        decide = policy.decide
        for path in paths:
            decide(path, Operation.READ)

    def baseline() -> None:
        for path in paths:
            verdict = "deny-default"
            for kind, pattern in compiled:
                if fnmatch.fnmatchcase(path, pattern):
                    verdict = kind
                    break
            del verdict

    ours_s = median_time(ours, 5)
    base_s = median_time(baseline, 3)
    print(
        f"{'policy decisions/s (48 rules x 100,000 paths)':<44} "
        f"{len(paths) / ours_s:>12,.0f}/s  fnmatch {len(paths) / base_s:>12,.0f}/s  "
        f"speed-up {base_s / ours_s:>5.1f}x  (target >= 500,000/s)"
    )


def make_tree(root: Path, files: int, per_dir: int = 50) -> None:
    for index in range(files):
        directory = root / f"d{index // per_dir // 20}" / f"e{index // per_dir}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"f{index}.txt").write_text(
            f"line one of {index}\nneedle {index}\n" if index % 7 == 0 else f"plain {index}\n"
        )


def run_native(argv: list[str], cwd: Path) -> None:
    subprocess.run(argv, cwd=cwd, capture_output=True, check=False)


def bench_commands(tmp: Path) -> None:
    base = tmp / "base"
    (base / "notes").mkdir(parents=True)
    (base / "notes" / "small.txt").write_text("hello\n" * 20)
    make_tree(base / "grep2k", 2_000)
    make_tree(base / "find10k", 10_000)
    policy = PermissionPolicy(
        base=base, allow=(PermissionRule(pattern="**"),), deny=(PermissionRule(pattern="**/.env"),)
    )
    engine = FileCommandEngine(policy)

    def guarded(*tokens: tuple[str, Tag]) -> Callable[[], object]:
        def run() -> None:
            result = engine.run(list(tokens))
            assert result.exit_status in (0, 1), result.value

        return run

    c, f, a, p = Tag.CMD, Tag.FLG, Tag.ARG, Tag.PTH
    cases = [
        (
            "cat small file",
            guarded(("cat", c), ("notes/small.txt", p)),
            ["cat", "notes/small.txt"],
            200,
        ),
        (
            "grep -r over 2,000 files",
            guarded(("grep", c), ("-r", f), ("needle", a), ("grep2k", p)),
            ["grep", "-r", "needle", "grep2k"],
            20,
        ),
        (
            "find over 10,000 files",
            guarded(("find", c), ("find10k", p), ("-name", f), ("*.txt", a)),
            ["find", "find10k", "-name", "*.txt"],
            10,
        ),
    ]
    for label, ours, argv, repeat in cases:
        row(
            label,
            median_time(ours, repeat),
            median_time(lambda a=argv: run_native(a, base), repeat),
        )


def bench_patch(tmp: Path) -> None:
    base = tmp / "patch"
    base.mkdir()
    target = base / "big.txt"
    line = b"the quick brown fox jumps over the lazy dog 0123456789\n"
    body = line * (10 * 1024 * 1024 // len(line))
    target.write_bytes(body[: len(body) // 2] + b"UNIQUE-MARKER\n" + body[len(body) // 2 :])
    policy = PermissionPolicy(base=base, allow=(PermissionRule(pattern="**"),))
    state = {"flip": False}

    def ours() -> None:
        old, new = (
            ("UNIQUE-MARKER", "UNIQUE-MARKEr")
            if not state["flip"]
            else ("UNIQUE-MARKEr", "UNIQUE-MARKER")
        )
        state["flip"] = not state["flip"]
        apply_patch(policy, "big.txt", old, new)

    plain_state = {"flip": False}

    def baseline() -> None:
        old, new = (
            (b"UNIQUE-MARKER", b"UNIQUE-MARKEr")
            if not plain_state["flip"]
            else (b"UNIQUE-MARKEr", b"UNIQUE-MARKER")
        )
        plain_state["flip"] = not plain_state["flip"]
        data = target.read_bytes()
        target.write_bytes(data.replace(old, new, 1))

    def durable_baseline() -> None:
        baseline()
        with open(target, "rb+") as handle:
            os.fsync(handle.fileno())

    row("apply_patch, 10 MB file (atomic + fsync)", *paired(ours, baseline, 15))
    row("  same, beside read+write+fsync", *paired(ours, durable_baseline, 15))

    target.write_bytes(b"a" * 200_000)
    needle = "a" * 100_000

    def ambiguous() -> None:
        try:
            apply_patch(policy, "big.txt", needle, "b")
        except PatchError:
            return
        raise AssertionError("an overlapping old_string was applied")

    def one_find() -> None:
        target.read_bytes().find(needle.encode())

    row("apply_patch refusing 100,000 overlapping a's", *paired(ambiguous, one_find, 5))


def main() -> None:
    print(f"python {os.sys.version.split()[0]}; medians; ratio = guarded / baseline")
    bench_policy()
    with tempfile.TemporaryDirectory() as tmp:
        bench_commands(Path(tmp))
        bench_patch(Path(tmp))


if __name__ == "__main__":
    main()
