"""What the SafeScripts clients return and raise (both clients, the same)."""

from __future__ import annotations

from dataclasses import dataclass

from roboz.shed.safe_scripts.network import RunNetwork


class SafeScriptsError(Exception):
    """Base class of every SafeScripts client error."""


class HelperUnavailable(SafeScriptsError):
    """The helper's socket is missing, refuses connections or is not accessible to us."""


class ClientRefused(SafeScriptsError):
    """The helper does not authorize this client (no matching [[clients]] rule)."""


class HelperBusy(SafeScriptsError):
    """The helper is at its connection limit or this client at its run limit."""


class ProtocolMismatch(SafeScriptsError):
    """The helper speaks another protocol version, or sent bytes we cannot decode."""


class HelperProtocolError(SafeScriptsError):
    """The helper rejected our request as malformed."""


class ConnectionLost(SafeScriptsError):
    """The helper closed the connection before sending a completion."""


class HelperTimeout(SafeScriptsError):
    """No frame from the helper within the client's timeout."""


@dataclass(frozen=True)
class ScriptInfo:
    name: str
    description: str


@dataclass(frozen=True)
class ShellScriptResult:
    status: str
    exit_code: int | None
    signal: int | None
    stdout: str
    stderr: str
    diagnostic: str
    wall_time_s: float
    cpu_time_s: float
    peak_memory_bytes: int
    limit: str | None
    # True when more output arrived than the client keeps (max_capture_bytes per stream).
    output_truncated: bool = False
    # A run whose helper profile has a network allowlist: its traffic through the helper's
    # proxy and every attempt the proxy refused ("network: host:port is not allowed ...").
    network: RunNetwork | None = None

    @property
    def ok(self) -> bool:
        return self.status == "success"

    @property
    def exit_status(self) -> int | None:
        """Shell convention: the exit code, or 128+N for death by signal N."""
        if self.exit_code is not None:
            return self.exit_code
        if self.signal is not None:
            return 128 + self.signal
        return None
