"""Start-up time: ``import roboz`` against ``import pydantic``, ``roboz --help`` against
``import typer``, and ``roboz scripts run --help`` (what a helper run pays before it connects),
each a fresh interpreter, measured in the same run; then the slowest imports of each from
``python -X importtime``.

Targets (issue 32): ``import roboz`` <= 2x ``import pydantic``, ``roboz --help`` <= 3x
``import typer``. Best of N runs: start-up has no useful mean on a shared machine.
"""

from __future__ import annotations

import subprocess
import sys
import time

CASES = {
    "import pydantic": ["-c", "import pydantic"],
    "import typer": ["-c", "import typer"],
    "import roboz": ["-c", "import roboz"],
    "from roboz import Agent, tool": ["-c", "from roboz import Agent, tool"],
    "roboz --help": ["-m", "roboz.cli", "--help"],
    "roboz scripts run --help": ["-m", "roboz.cli", "scripts", "run", "--help"],
}
RATIOS = (
    ("import roboz", "import pydantic", 2.0),
    ("roboz --help", "import typer", 3.0),
)


def best_of(args: list[str], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, *args], check=True, capture_output=True)
        best = min(best, time.perf_counter() - started)
    return best


def slowest_imports(args: list[str], count: int = 5) -> list[tuple[int, str]]:
    """The ``count`` top-level imports with the largest cumulative time (microseconds)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args], capture_output=True, text=True, check=True
    )
    found: list[tuple[int, str]] = []
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            name = parts[2]
            if not name.startswith("  "):  # a top-level import of the command itself
                found.append((int(parts[1]), name.strip()))
    return sorted(found, reverse=True)[:count]


def main(quick: bool = False) -> None:
    runs = 3 if quick else 10
    seconds = {name: best_of(args, runs) for name, args in CASES.items()}
    print(f"best of {runs} fresh interpreters ({sys.executable}):")
    for name, value in seconds.items():
        print(f"  {name:<30} {value * 1000:7.0f} ms")
    for subject, baseline, target in RATIOS:
        ratio = seconds[subject] / seconds[baseline]
        verdict = "ok" if ratio <= target else "OVER"
        print(f"  {subject} / {baseline}: {ratio:.2f}x (target <= {target:g}x: {verdict})")
    for name in ("import roboz", "roboz --help"):
        top = ", ".join(
            f"{module} {us / 1000:.0f} ms" for us, module in slowest_imports(CASES[name])
        )
        print(f"  slowest imports of {name}: {top}")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
