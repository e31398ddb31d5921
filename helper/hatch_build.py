"""Build hook: compile sandbox-init (roboz_helper/sandbox/*.c) into the package.

Runs for wheels and for editable installs (``uv sync`` in a clone, ``pip install -e``), so
the program is always next to the module that executes it (init_wire.BINARY). Statically
linked when the C library allows it, so that nothing of a sandbox's /usr is loaded into its
pid 1. Needs gcc and the C library's headers (scripts/setup.sh installs them).

The library installs roboz-helper too, for its wire protocol alone, on any platform and often
without a compiler; so where there is no Linux or no compiler the wheel is built without the
program (a warning says so) and the daemon refuses to start, naming what is missing and how
to reinstall. ROBOZ_HELPER_REQUIRE_INIT=1 makes that a build error instead (the daemon's own
install should set it); a compiler that fails on Linux is always an error."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCES = [
    Path("roboz_helper/sandbox/init.c"),
    Path("roboz_helper/sandbox/init_root.c"),
    Path("roboz_helper/sandbox/fork_server.c"),
]
TARGET = Path("roboz_helper/sandbox/sandbox-init")
FLAGS = ["-O2", "-Wall", "-Wextra", "-Werror"]


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        sources, target = [str(root / s) for s in SOURCES], root / TARGET
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None or not sys.platform.startswith("linux"):
            why = "no C compiler (apt-get install gcc)" if cc is None else "not Linux"
            if os.environ.get("ROBOZ_HELPER_REQUIRE_INIT") == "1":
                raise RuntimeError(f"roboz-helper cannot build sandbox-init: {why}")
            self.app.display_warning(
                f"roboz-helper: sandbox-init not built ({why}); the protocol works, the "
                "daemon will refuse to start until it is reinstalled with a compiler"
            )
            return
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
