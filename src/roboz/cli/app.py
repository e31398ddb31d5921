"""The ``roboz`` typer app and ``main``, which owns exit codes and error printing.

Errors are one line on stderr, ``roboz: error: ...``; ``--debug`` (on every command) or
``ROBOZ_DEBUG=1`` adds the traceback with its cause. Exit codes: see ``roboz.cli.errors``.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence
from typing import Annotated

import typer

from roboz.cli import env, inventory, mcp, scaffold, scripts, serve, threads, threads_api, worker
from roboz.cli.base import App, DebugOption, debug_enabled, set_debug
from roboz.cli.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CliError

app = App(help="RoboZ: typed LLM agents whose tools chain conditionally. Chain tools. Skip calls.")
app.add_typer(inventory.app, name="inventory")
app.add_typer(env.app, name="env")
app.add_typer(scaffold.tool_app, name="tool")
app.add_typer(scaffold.skill_app, name="skill")
app.add_typer(scripts.app, name="scripts")
app.add_typer(mcp.app, name="mcp")
app.add_typer(threads.app, name="threads")
threads_api.register(threads.app)
app.add_typer(serve.app, name="serve")
app.command("worker")(worker.worker)


def _show_version(wanted: bool) -> None:
    if wanted:
        from roboz import __version__

        typer.echo(f"roboz {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _options(
    debug: DebugOption = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", is_eager=True, callback=_show_version
        ),
    ] = False,
) -> None:
    if debug:
        set_debug(True)


def _fail(message: str, code: int, error: BaseException | None = None) -> int:
    if error is not None and debug_enabled():
        traceback.print_exception(error, file=sys.stderr)
    # One line, whatever the message contains.
    print(f"roboz: error: {' '.join(message.split())}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    set_debug(False)
    args = list(sys.argv[1:] if argv is None else argv)
    command = typer.main.get_command(app)
    try:
        result = command.main(
            args=args,
            prog_name="roboz",
            standalone_mode=False,
        )
    except typer.Abort as error:
        if isinstance(error.__cause__, EOFError):
            return _fail("input ended before it was complete", EXIT_FAILURE, error)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except CliError as error:
        return _fail(str(error), error.exit_code, error)
    except typer.TyperException as error:
        # Typer's own errors: a usage error (exit code 2) says which command to ask for help.
        code = getattr(error, "exit_code", EXIT_FAILURE)
        context = getattr(error, "ctx", None)
        hint = ""
        if code == EXIT_USAGE and context is not None:
            hint = f" (see '{context.command_path} --help')"
        message = error.format_message().strip()
        if not message:
            return code  # e.g. a group called without a command: its help is already shown
        return _fail(f"{message}{hint}", code, error)
    except Exception as error:
        hint = "" if debug_enabled() else " (run with --debug for the traceback)"
        return _fail(f"{type(error).__name__}: {error}{hint}", EXIT_FAILURE, error)
    return result if isinstance(result, int) else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
