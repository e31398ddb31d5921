"""How commands report failure: one line on stderr and a documented exit code."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """An expected, explained failure; ``main`` prints the message without a traceback."""

    exit_code = EXIT_FAILURE


class CliUsageError(CliError):
    """The arguments themselves are wrong (exit code 2)."""

    exit_code = EXIT_USAGE
