"""Client side of SafeScripts: talk to the roboz-helper daemon over its Unix socket, blocking
(SafeScriptsClient) or from asyncio (AsyncSafeScriptsClient)."""

from roboz.shed.safe_scripts.aio import AsyncSafeScriptsClient, OutputChunk, ScriptStream
from roboz.shed.safe_scripts.client import (
    ClientRefused,
    ClientSettings,
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
from roboz.shed.safe_scripts.network import NetworkRefusal, RunNetwork

__all__ = [
    "AsyncSafeScriptsClient",
    "ClientRefused",
    "ClientSettings",
    "ConnectionLost",
    "HelperBusy",
    "HelperProtocolError",
    "HelperTimeout",
    "HelperUnavailable",
    "NetworkRefusal",
    "OutputChunk",
    "ProtocolMismatch",
    "RunNetwork",
    "SafeScriptsClient",
    "SafeScriptsError",
    "ScriptInfo",
    "ScriptStream",
    "ShellScriptResult",
]
