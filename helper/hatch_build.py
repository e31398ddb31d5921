"""Build hook: compile sandbox-init (roboz_helper/sandbox/init*.c) into the package.

Runs for wheels and for editable installs (``uv sync`` in a clone, ``pip install -e``), so
the program is always next to the module that executes it (init_wire.BINARY). Statically
linked when the C library allows it, so that nothing of a sandbox's /usr is loaded into its
pid 1. Needs gcc and the C library's headers (scripts/setup.sh installs them)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCES = [Path("roboz_helper/sandbox/init.c"), Path("roboz_helper/sandbox/init_root.c")]
TARGET = Path("roboz_helper/sandbox/sandbox-init")
FLAGS = ["-O2", "-Wall", "-Wextra", "-Werror"]


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        sources, target = [str(root / s) for s in SOURCES], root / TARGET
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise RuntimeError(
                "roboz-helper needs a C compiler to build sandbox-init (apt-get install gcc)"
            )
        attempts = [[cc, *FLAGS, "-static", "-o", str(target), *sources],
                    [cc, *FLAGS, "-o", str(target), *sources]]  # fmt: skip
        errors = []
        for argv in attempts:
            done = subprocess.run(argv, capture_output=True, text=True)
            if done.returncode == 0:
                break
            errors.append(done.stderr)
        else:
            raise RuntimeError("could not compile sandbox-init:\n" + "\n".join(errors))
        build_data["artifacts"].append(str(TARGET))
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
