"""`roboz scripts`: talk to the SafeScripts helper daemon from a terminal.

`run` and `exec` stream the run's output live and exit with its exit status (128+N when a
signal ended it). When the run did not finish on its own, or never started, the exit code
says why (see EXIT_CODES); the reason goes to stderr.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, NoReturn, TypeVar

import typer

from roboz.cli.base import App
from roboz.cli.errors import EXIT_INTERRUPTED, CliError

if TYPE_CHECKING:
    from roboz.shed.safe_scripts.client import SafeScriptsClient, ShellScriptResult

T = TypeVar("T")

DEFAULT_SOCKET = "/run/roboz-helper/helper.sock"

# Codes beside the run's own status; chosen from conventions scripts rarely use themselves
# (timeout(1)'s 124, the shell's 126, sysexits' 69/75/76).
EXIT_TIMEOUT = 124
EXIT_OUTPUT_LIMIT = 125
EXIT_REFUSED = 126
EXIT_UNAVAILABLE = 69
EXIT_BUSY = 75
EXIT_PROTOCOL = 76
EXIT_CODES = {
    "timeout": EXIT_TIMEOUT,
    "output_limit": EXIT_OUTPUT_LIMIT,
    "refused": EXIT_REFUSED,
    "busy": EXIT_BUSY,
}

app = App(
    help="Run scripts and commands through the SafeScripts helper daemon. Exit codes of run "
    "and exec: the run's own exit status (128+N for signal N); 124 timeout, 125 output limit, "
    "126 refused, 69 helper unreachable or stopped mid-run, 75 helper busy, 76 protocol error.",
)

AllowOption = Annotated[
    list[str] | None,
    typer.Option(
        "--allow",
        help="Ask for only this entry of the profile's network allowlist ('pypi.org:443'); "
        "repeat for more. The helper refuses a run that asks for more than its profile allows.",
        metavar="HOST[:PORT]",
    ),
]

SocketOption = Annotated[
    str,
    typer.Option(
        "--socket",
        envvar="ROBOZ_HELPER_SOCKET",
        help="The helper's Unix socket.",
        show_default=True,
    ),
]


def _fail(message: str, code: int) -> NoReturn:
    raise CliError(message, exit_code=code)


def _stream(stream: str, data: bytes) -> None:
    target = sys.stdout if stream == "stdout" else sys.stderr
    target.buffer.write(data)
    target.flush()


def _finish(result: ShellScriptResult) -> NoReturn:
    if result.network is not None:  # what the helper's egress proxy refused the run
        for line in result.network.summary():
            typer.echo(f"roboz: {line}", err=True)
    code = EXIT_CODES.get(result.status)
    if code is not None:
        limit = f" ({result.limit} limit)" if result.limit else ""
        _fail(f"{result.status}{limit}: {result.diagnostic}", code)
    if result.status == "killed" and result.limit:
        typer.echo(f"roboz: note: killed by the {result.limit} limit", err=True)
    status = result.exit_status
    if status is None and result.status == "killed" and not result.limit:
        # No limit and no signal of its own: the helper ended the run (it is shutting down).
        _fail(
            f"the helper stopped the run: {result.diagnostic or 'no exit status'}; run it again "
            "once the helper is back",
            EXIT_UNAVAILABLE,
        )
    if status is None:
        _fail(f"{result.status}: {result.diagnostic or 'no exit status'}", 1)
    raise typer.Exit(status)


def _client(socket: str, network_allow: list[str] | None = None) -> SafeScriptsClient:
    # The client module only (not the package's asyncio client, nor the agent's tool): a
    # helper run from the terminal should not pay for them before it connects.
    from roboz.shed.safe_scripts.client import SafeScriptsClient

    return SafeScriptsClient(socket, network_allow=network_allow or None)


def _client_call(action: str, call: Callable[[], T]) -> T:
    from roboz.shed.safe_scripts.client import (
        ClientRefused,
        HelperBusy,
        HelperUnavailable,
        SafeScriptsError,
    )

    try:
        return call()
    except HelperUnavailable as error:
        _fail(str(error), EXIT_UNAVAILABLE)
    except HelperBusy as error:
        _fail(str(error), EXIT_BUSY)
    except ClientRefused as error:
        _fail(f"{action}: {error}", EXIT_REFUSED)
    except SafeScriptsError as error:
        _fail(f"{action}: {error}", EXIT_PROTOCOL)


@app.command()
def serve(
    policy: Annotated[
        Path, typer.Option("--policy", help="Policy TOML file.", exists=True, dir_okay=False)
    ],
    socket: Annotated[
        str | None, typer.Option("--socket", help="Socket path (overrides [server] socket).")
    ] = None,
) -> None:
    """Start the helper daemon in the foreground (normally systemd does this).

    Ctrl-C stops it; the exit code is then 130, as for every interrupted command.
    """
    missing = [name for name in ("prctl",) if importlib.util.find_spec(name) is None]
    if missing:
        raise CliError(
            f"the helper daemon needs {' and '.join(missing)}, which comes with "
            "roboz-helper[daemon]: pip install './helper[daemon]' from a RoboZ clone"
        )
    argv = [sys.executable, "-m", "roboz_helper", "serve", "--policy", str(policy)]
    if socket:
        argv += ["--socket", socket]
    raise typer.Exit(_supervise(argv))


def _supervise(argv: list[str]) -> int:
    """Run the daemon as a child, pass SIGINT/SIGTERM on, and exit as an interrupted command.

    The daemon shuts down cleanly (exit 0) on either signal; what our caller learns is that the
    command was interrupted: 130 for SIGINT, 128+N for another signal, as shells report it.
    """
    received: list[int] = []
    # The daemon's errors then start "roboz: error:", as every error of this command does.
    child = subprocess.Popen(argv, env={**os.environ, "ROBOZ_HELPER_PROG": "roboz"})

    def forward(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        if child.poll() is None:
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        status = child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:
        return EXIT_INTERRUPTED if received[0] == signal.SIGINT else 128 + received[0]
    return 128 - status if status < 0 else status


@app.command()
def check(socket: SocketOption = DEFAULT_SOCKET) -> None:
    """Connect to the helper and show who it takes us for and our limits."""
    client = _client(socket)
    greeting = _client_call("check", client.check)
    limits = greeting.limits
    typer.echo(
        f"helper {greeting.helper_version} (protocol {greeting.protocol_version}) at {socket}: "
        f"profile {greeting.profile!r} for uid {greeting.uid}"
    )
    network = (
        limits.network
        if isinstance(limits.network, str)
        else f"through the helper's proxy to {', '.join(limits.network.allow)}"
    )
    typer.echo(
        f"limits: timeout {limits.timeout_s:g}s, output {limits.max_output_bytes} bytes, "
        f"pids {limits.pids_max}, memory {limits.memory_max_bytes} bytes, "
        f"network {network}, {limits.max_runs} concurrent run(s)"
    )


@app.command("list")
def list_scripts(socket: SocketOption = DEFAULT_SOCKET) -> None:
    """List the scripts this client may run, with their descriptions."""
    client = _client(socket)
    scripts = _client_call("list", client.list_scripts)
    if not scripts:
        # The helper's reply does not say what it skipped: name the rule it lists by.
        typer.echo(
            "no scripts (the helper lists only trusted scripts: root-owned, not "
            "group/world-writable; see roboz-helper check-policy)",
            err=True,
        )
    for entry in scripts:
        typer.echo(f"{entry.name}\t{entry.description}" if entry.description else entry.name)


# Everything after the script (or the command) is its own: options of ours come before it.
_PASS_THROUGH = {"allow_interspersed_args": False}


def _own_args(args: list[str] | None) -> list[str]:
    """The arguments after the script, with a separating ``--`` (``run s.sh -- -x``) removed."""
    args = list(args or [])
    return args[1:] if args[:1] == ["--"] else args


@app.command(context_settings=_PASS_THROUGH)
def run(
    script: Annotated[
        str, typer.Argument(help="Script path relative to the scripts directory.", metavar="SCRIPT")
    ],
    args: Annotated[
        list[str] | None,
        typer.Argument(help="Arguments for the script (all that follows it).", metavar="ARGS"),
    ] = None,
    socket: SocketOption = DEFAULT_SOCKET,
    allow: AllowOption = None,
) -> None:
    """Run a script in a fresh sandbox, streaming its output."""
    client = _client(socket, allow)
    own = _own_args(args)
    result = _client_call("run", lambda: client.run_script(script, own, on_output=_stream))
    _finish(result)


@app.command("exec", context_settings=_PASS_THROUGH)
def exec_command(
    argv: Annotated[
        list[str],
        typer.Argument(
            help="Absolute allowlisted executable and its arguments (all that follows it).",
            metavar="COMMAND",
        ),
    ],
    socket: SocketOption = DEFAULT_SOCKET,
    allow: AllowOption = None,
) -> None:
    """Run an allowlisted command in a fresh sandbox, streaming its output."""
    client = _client(socket, allow)
    command = _own_args(argv)
    result = _client_call("exec", lambda: client.exec_command(command, on_output=_stream))
    _finish(result)
