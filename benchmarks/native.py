"""The benchmarks' small C programs (``egress_forwarder.c``, ``sse_reader.c``): built at run
time with the machine's C compiler into the run's own directory, never kept between runs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def build(name: str, directory: Path) -> Path | str:
    """``benchmarks/NAME.c`` built as ``DIRECTORY/NAME``; else why not, in a line (no C
    compiler, or the compiler's first complaint)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return f"no C compiler to build benchmarks/{name}.c"
    binary = directory / name
    source = Path(__file__).with_name(f"{name}.c")
    built = subprocess.run(
        [cc, "-O2", "-Wall", "-Werror", "-o", str(binary), str(source)],
        capture_output=True,
        text=True,
    )
    if built.returncode != 0:
        first = (built.stderr.strip().splitlines() or ["?"])[0]
        return f"benchmarks/{name}.c did not build: {first}"
    return binary
