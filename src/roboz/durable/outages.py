"""DBOS patched to wait out a PostgreSQL restart over a Unix socket as it does over TCP.

Applied by ``DurableRuns.launch`` (every durable process, worker or not), after the URL was
checked, so from then on a connection error means an outage rather than a wrong address.
"""

from __future__ import annotations

from typing import Any


def wait_out_missing_sockets() -> None:
    """Make DBOS wait out a server whose Unix socket is gone, as it waits out one refusing TCP.

    While PostgreSQL restarts, its socket file does not exist, and psycopg 3.3 reports that
    as "connection is bad: ...", which DBOS 3.4's test of retriable errors does not match
    (it knows "connection failed"): a turn in flight would fail or stall instead of pausing.
    Applied once per process; a DBOS without these internals is left as it is.
    """
    try:
        import psycopg
        from dbos import _datasource, _sys_db  # pyright: ignore[reportPrivateUsage]
    except ImportError:  # pragma: no cover - the durable extra brings both
        return
    original: Any = getattr(_sys_db, "retriable_postgres_exception", None)
    if original is None or getattr(original, "roboz_waits_out_sockets", False):
        return

    def retriable(error: Exception) -> bool:
        if original(error):
            return True
        cause = getattr(error, "orig", None)
        return isinstance(cause, psycopg.OperationalError) and str(cause).startswith(
            "connection is bad:"
        )

    retriable.roboz_waits_out_sockets = True  # type: ignore[attr-defined]
    for module in (_sys_db, _datasource):
        if getattr(module, "retriable_postgres_exception", None) is original:
            module.retriable_postgres_exception = retriable  # type: ignore[attr-defined]
