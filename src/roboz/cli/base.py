"""What every ``roboz`` command shares: plain help, usage lines and a ``--debug`` option.

Help is rendered without rich markup, so a docstring's words appear as written (``[server]``
stays ``[server]``), flags show no ``<bool>`` type and arguments appear in the usage line as
``SCRIPT [ARGS]...``. Every command takes ``--debug`` itself, so it can be added after the
command, where people add it once something failed.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from typer.core import TyperArgument, TyperCommand

F = TypeVar("F", bound=Callable[..., Any])

DEBUG_HELP = "Show the traceback of an error and its cause (same as ROBOZ_DEBUG=1)."


class _Debug:
    enabled = False


def set_debug(enabled: bool) -> None:
    _Debug.enabled = enabled


def debug_enabled() -> bool:
    return _Debug.enabled or os.environ.get("ROBOZ_DEBUG", "").lower() in ("1", "true", "yes")


DebugOption = Annotated[bool, typer.Option("--debug", help=DEBUG_HELP)]


class Command(TyperCommand):
    """A typer command whose usage line names arguments plainly (``SCRIPT``, not ``{script}``)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                name = param.display_name_raw.upper()
                if not param.required:
                    name = f"[{name}]"
                if param.nargs != 1:
                    name += "..."
                pieces.append(name)
        return pieces


def _with_debug(func: F) -> F:
    """``func`` with a keyword ``--debug`` option added to what typer sees of its signature."""
    signature = inspect.signature(func, eval_str=True)
    debug = inspect.Parameter(
        "debug", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=DebugOption
    )

    @functools.wraps(func)
    def command(*args: Any, debug: bool = False, **kwargs: Any) -> Any:
        if debug:
            set_debug(True)
        return func(*args, **kwargs)

    parameters = [*signature.parameters.values(), debug]
    command.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in parameters} | {
        "return": signature.return_annotation
    }
    return command  # type: ignore[return-value]


class App(typer.Typer):
    """``typer.Typer`` with the house settings; ``command`` adds ``--debug`` and plain usage."""

    def __init__(self, *, help: str, **settings: Any) -> None:
        settings.setdefault("no_args_is_help", True)
        super().__init__(
            help=help,
            rich_markup_mode=None,
            add_completion=False,
            # main() prints errors itself, as one line; typer's pretty tracebacks would not.
            pretty_exceptions_enable=False,
            **settings,
        )

    def command(self, name: str | None = None, **settings: Any) -> Callable[[F], F]:
        settings.setdefault("cls", Command)
        register = super().command(name, **settings)

        def decorator(func: F) -> F:
            register(_with_debug(func))
            return func

        return decorator
