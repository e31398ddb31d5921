"""The ``roboz`` typer app and ``main``, which owns exit codes and error printing.

Exit codes: 0 success, 1 operational failure, 2 invalid arguments, 130 interrupted (Ctrl-C).
Errors are one line on stderr; ``--debug`` or ``ROBOZ_DEBUG=1`` adds the traceback.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence
from typing import Annotated

import typer

from roboz.cli import env, inventory, mcp, scaffold, scripts
from roboz.cli.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CliError

app = typer.Typer(
    name="roboz",
    help="RoboZ: typed LLM agents whose tools chain conditionally. Chain tools. Skip calls.",
    no_args_is_help=True,
    add_completion=False,
    # main() prints errors itself, as one line; typer's pretty tracebacks would bypass that.
    pretty_exceptions_enable=False,
)
app.add_typer(inventory.app, name="inventory")
app.add_typer(env.app, name="env")
app.add_typer(scaffold.tool_app, name="tool")
app.add_typer(scaffold.skill_app, name="skill")
app.add_typer(scripts.app, name="scripts")
app.add_typer(mcp.app, name="mcp")


class _Run:
    debug = False


@app.callback()
def _options(
    debug: Annotated[
        bool,
        typer.Option("--debug", help="Show the traceback of an error (same as ROBOZ_DEBUG=1)."),
    ] = False,
) -> None:
    _Run.debug = _Run.debug or debug


def _debug_enabled() -> bool:
    return _Run.debug or os.environ.get("ROBOZ_DEBUG", "").lower() in ("1", "true", "yes")


def _fail(message: str, code: int, error: BaseException | None = None) -> int:
    if error is not None and _debug_enabled():
        traceback.print_exception(error, file=sys.stderr)
    # One line, whatever the message contains.
    print(f"roboz: error: {' '.join(message.split())}", file=sys.stderr)
    return code


# Groups whose options are all ours; others (scripts) may pass --debug on to what they run.
_DEBUG_ANYWHERE = frozenset({"inventory", "env", "tool", "skill"})


def _take_debug_flag(args: list[str]) -> list[str]:
    """Accept --debug after the command too, where people add it once something failed.

    Only for our own command groups and before any ``--``: elsewhere it may be an argument
    meant for a script or program.
    """
    group = next((index for index, arg in enumerate(args) if not arg.startswith("-")), None)
    end = len(args)
    if group is not None and args[group] not in _DEBUG_ANYWHERE:
        end = group
    if "--" in args[:end]:
        end = args.index("--")
    if "--debug" not in args[:end]:
        return args
    _Run.debug = True
    return [arg for arg in args[:end] if arg != "--debug"] + args[end:]


def main(argv: Sequence[str] | None = None) -> int:
    _Run.debug = False
    args = _take_debug_flag(list(sys.argv[1:] if argv is None else argv))
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
        hint = "" if _debug_enabled() else " (run with --debug for the traceback)"
        return _fail(f"{type(error).__name__}: {error}{hint}", EXIT_FAILURE, error)
    return result if isinstance(result, int) else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
