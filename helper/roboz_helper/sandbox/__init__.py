"""The sandbox every SafeScripts run happens in (see README.md in this directory)."""

from __future__ import annotations

from .runner import reclaim_stale_runs, run_in_sandbox
from .spec import SandboxError, SandboxOutcome, SandboxSpec
from .support import sandbox_support

__all__ = [
    "SandboxError",
    "SandboxOutcome",
    "SandboxSpec",
    "reclaim_stale_runs",
    "run_in_sandbox",
    "sandbox_support",
]
