"""Run every ``bench_*.py`` module here (or the ones named) and print their figures.

Each module measures its subject beside a baseline taken in the same run and prints ratios,
because absolute times on a shared machine are noise.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    available = sorted(
        info.name
        for info in pkgutil.iter_modules([str(Path(__file__).parent)])
        if info.name.startswith("bench_")
    )
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "names", nargs="*", help=f"which to run (default all): {', '.join(available)}"
    )
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, for a smoke run")
    args = parser.parse_args(argv)
    chosen = args.names or available
    unknown = [name for name in chosen if name not in available]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    status = 0
    for name in chosen:
        print(f"\n=== {name} ===", flush=True)
        started = time.perf_counter()
        module = importlib.import_module(f"benchmarks.{name}")
        takes_quick = "quick" in inspect.signature(module.main).parameters
        try:
            # Modules with their own argparse see only their name, not this runner's options.
            sys.argv = [f"benchmarks/{name}.py"]
            result = module.main(quick=args.quick) if takes_quick else module.main()
            if isinstance(result, int) and result != 0:
                status = 1
        except Exception as error:  # one broken benchmark should not hide the others
            print(f"{name} failed: {type(error).__name__}: {error}", file=sys.stderr)
            status = 1
        print(f"({name} took {time.perf_counter() - started:.1f} s)")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
