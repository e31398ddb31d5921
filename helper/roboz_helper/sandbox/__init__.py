"""The sandbox every SafeScripts run happens in (see README.md in this directory).

The names below are loaded on first use, not on import: the zygote (zygote.py) imports
modules of this package, and every fork of it copies what it imported, so it must not pull
in the runner (asyncio, logging, subprocess: ~150 modules) just by importing the package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .runner import reclaim_stale_runs, run_in_sandbox
    from .spec import SandboxError, SandboxOutcome, SandboxSpec
    from .support import sandbox_support

_WHERE = {
    "reclaim_stale_runs": "runner",
    "run_in_sandbox": "runner",
    "SandboxError": "spec",
    "SandboxOutcome": "spec",
    "SandboxSpec": "spec",
    "sandbox_support": "support",
}
__all__ = [
    "SandboxError",
    "SandboxOutcome",
    "SandboxSpec",
    "reclaim_stale_runs",
    "run_in_sandbox",
    "sandbox_support",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value
