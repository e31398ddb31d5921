"""How commands report failure: one line on stderr and a documented exit code.

The rule, for every command:

- 0: it did what was asked.
- 1: it started but could not finish (a file it would overwrite exists, a password does not
  open a file).
- 2: it could not start with what it was given: an unknown command or option, a bad value,
  or a named input file that does not exist or is invalid (a catalogue, a policy: the same
  code for every command and every file).
- 130: interrupted (Ctrl-C).
- ``roboz scripts run`` and ``exec`` add the run's own status and the codes in
  ``roboz.cli.scripts`` (124-126 for the run, 69/75/76 for the helper).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """An expected, explained failure; ``main`` prints the message without a traceback."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class CliUsageError(CliError):
    """The arguments themselves are wrong (exit code 2)."""

    exit_code = EXIT_USAGE
