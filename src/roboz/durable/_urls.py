"""One PostgreSQL URL, as RoboZ's stores take it (libpq) and as DBOS takes it (SQLAlchemy)."""

from __future__ import annotations

from typing import Any

from roboz.durable.errors import DurableSchemaError
from roboz.threads.errors import ThreadStoreError
from roboz.threads.postgres import describe, redacted

__all__ = ["describe_server", "migrate_hint", "redacted", "sqlalchemy_url", "with_search_path"]


def describe_server(url: str) -> str:
    """``PostgreSQL at HOST:PORT (database DB)``; a malformed URL is a DurableSchemaError."""
    try:
        return describe(url)
    except ThreadStoreError as error:
        raise DurableSchemaError(str(error)) from None


def migrate_hint(url: str) -> str:
    return f"roboz threads migrate --url '{redacted(url)}'"


def sqlalchemy_url(url: str) -> str:
    """``url`` (a libpq URL or conninfo string) as a ``postgresql+psycopg://`` URL for DBOS.

    A Unix socket directory as host goes into the query, where psycopg reads it."""
    import sqlalchemy as sa
    from psycopg.conninfo import conninfo_to_dict

    params: dict[str, Any] = dict(conninfo_to_dict(url))
    host = params.pop("host", None)
    port = params.pop("port", None)
    query: dict[str, str] = {k: str(v) for k, v in params.items() if v is not None}
    user, password = query.pop("user", None), query.pop("password", None)
    database = query.pop("dbname", None) or user or "postgres"
    if host is not None and str(host).startswith("/"):
        query["host"] = str(host)
        host = None
    built = sa.URL.create(
        "postgresql+psycopg",
        username=user,
        password=password,
        host=host,
        port=int(port) if port else None,
        database=database,
        query=query,
    )
    return built.render_as_string(hide_password=False)


def with_search_path(url: str, schema: str) -> str:
    """A ``sqlalchemy_url`` whose sessions start with ``schema`` as their search path (the
    server applies it as it accepts the connection: no statement of its own), after any
    ``options`` the URL already gives."""
    import sqlalchemy as sa

    from roboz.threads.postgres import check_schema_name

    check_schema_name(schema)
    parsed = sa.make_url(url)
    given = parsed.query.get("options")
    options = " ".join([*([] if given is None else [str(given)]), f"-c search_path={schema}"])
    return parsed.update_query_dict({"options": options}).render_as_string(hide_password=False)
