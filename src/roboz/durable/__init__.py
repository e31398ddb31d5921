"""Durable agent runs: each turn of a thread is a DBOS workflow whose state lives in PostgreSQL.

Install ``roboz[durable]`` (DBOS 3 and psycopg). Documentation grows with the implementation.
"""

from __future__ import annotations

from roboz.durable.client import DurableClient, RunHandle
from roboz.durable.errors import DurableError, DurableSchemaError, WorkflowConflictError
from roboz.durable.keys import idempotency_key
from roboz.durable.runs import DurableRuns
from roboz.durable.schema import migrate

__all__ = [
    "DurableClient",
    "DurableError",
    "DurableRuns",
    "DurableSchemaError",
    "RunHandle",
    "WorkflowConflictError",
    "idempotency_key",
    "migrate",
]
