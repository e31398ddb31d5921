"""`roboz mcp`: serve RoboZ's guarded file tools (and SafeScripts) to an MCP host.

``serve`` speaks MCP on stdin/stdout, so a host (an IDE, a desktop assistant) starts it as a
child process; nothing but MCP messages may go to stdout, so logs go to stderr.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from roboz_helper.file_policy import FilePolicyError

from roboz.cli.base import App
from roboz.cli.errors import CliError, CliUsageError

if TYPE_CHECKING:
    from roboz.shed.sandbox import PermissionPolicy

app = App(help="Serve guarded file tools and sandboxed scripts to MCP hosts (needs the mcp extra).")

PolicyOption = Annotated[
    Path,
    typer.Option(
        "--policy",
        help="Permission policy TOML: base, default, precedence and allow/deny/ask rules.",
    ),
]


def _load(policy: Path) -> PermissionPolicy:
    # The loader is in the core install (the MCP extra is needed only to serve); loaded
    # here, so that `roboz --help` does not import the guard and the models.
    from roboz.shed.sandbox import PermissionPolicy

    try:
        return PermissionPolicy.from_file(policy)
    except FilePolicyError as error:
        raise CliUsageError(f"{error}{_other_kind_hint(policy)}") from None


def _other_kind_hint(policy: Path) -> str:
    """A helper policy given to this checker: say which checker it is for."""
    import tomllib

    try:
        keys = set(tomllib.loads(policy.read_text(encoding="utf-8")))
    except (OSError, ValueError, RecursionError):  # the hint must never mask the error
        return ""
    if keys & {"server", "profiles", "clients"} and "base" not in keys:
        return (
            " (this is a helper policy for roboz-helper, not a permission policy: check it "
            "with roboz-helper check-policy)"
        )
    return ""


@app.command()
def serve(
    policy: PolicyOption,
    socket: Annotated[
        str | None,
        typer.Option(
            "--socket",
            help="SafeScripts helper socket; when given, run_shell_script is offered too.",
        ),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", help="Log every permission decision to stderr.")
    ] = False,
) -> None:
    """Serve guarded run_file_command, apply_patch, process_pdf over MCP on stdio.

    Every path is checked against the policy; with --socket, run_shell_script is offered too.
    """
    permissions = _load(policy)
    if socket is not None and not os.path.exists(socket):
        raise CliUsageError(f"--socket {socket}: no such socket")
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="roboz mcp: %(message)s",
    )
    try:
        from roboz.mcp.serve import serve as run_server
    except ImportError as error:
        raise CliError(str(error)) from None  # roboz.mcp's message says how to install it
    run_server(permissions, socket_path=socket)


@app.command("check-policy")
def check_policy(policy: Annotated[Path, typer.Argument(help="The policy file to check.")]) -> None:
    """Check a policy file and print its rules (exit 0 ok, 2 invalid)."""
    print(_load(policy).rules_text())
