"""The words a run's life is told in, defined once: the sandbox produces them, the wire carries
them, the log prints them.

A leaf module (typing only): `roboz_helper.protocol`, which the library imports with msgspec
alone, and `roboz_helper.sandbox.spec`, which the daemon imports with the whole sandbox, both
take their vocabulary from here.
"""

from __future__ import annotations

from typing import Literal

# What a policy and the wire name (an allowlist is a table, not a word: egress/allowlist.py).
NetworkMode = Literal["none", "loopback"]
# What a sandbox is built with: "proxy" is loopback plus the egress proxy's listener, for a
# run with an allowlist.
SandboxNetwork = Literal["none", "loopback", "proxy"]
# Why the runner stopped a run before it ended on its own.
RunReason = Literal["timeout", "output", "cancelled"]
# How a sandbox run ended.
RunStatus = Literal["success", "failed", "timeout", "output_limit", "killed"]
# Which limit ended a run, so an agent can react (shorten, split, ask for more).
Limit = Literal["timeout", "output", "memory", "pids", "cpu", "seccomp"]
