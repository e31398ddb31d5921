"""Errors of durable runs."""

from __future__ import annotations


class DurableError(RuntimeError):
    """A durable run could not be started, found or completed."""


class DurableSchemaError(DurableError):
    """The database cannot serve durable runs: unreachable, or its schema is missing or newer.

    The message is one line naming the server (password redacted) and the command to run.
    """


class WorkflowConflictError(DurableError):
    """A workflow id (thread and turn) was reused with a different input."""


class TurnCancelledError(DurableError):
    """The durable turn was cancelled (``RunHandle.cancel``); the thread holds what it wrote."""
