"""Client side of SafeScripts: talk to the roboz-helper daemon over its Unix socket."""

from roboz.shed.safe_scripts.client import (
    ClientRefused,
    ConnectionLost,
    HelperBusy,
    HelperProtocolError,
    HelperTimeout,
    HelperUnavailable,
    ProtocolMismatch,
    SafeScriptsClient,
    SafeScriptsError,
    ScriptInfo,
    ShellScriptResult,
)

__all__ = [
    "ClientRefused",
    "ConnectionLost",
    "HelperBusy",
    "HelperProtocolError",
    "HelperTimeout",
    "HelperUnavailable",
    "ProtocolMismatch",
    "SafeScriptsClient",
    "SafeScriptsError",
    "ScriptInfo",
    "ShellScriptResult",
]
