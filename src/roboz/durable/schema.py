"""``migrate(url)``: prepare a database for durable runs (thread schema and DBOS tables)."""

from __future__ import annotations


def migrate(url: str, *, schema: str = "roboz") -> list[str]:
    """Create or upgrade everything durable runs need at ``url``; returns one line per part."""
    raise NotImplementedError
