"""Preparing a database for durable runs, and checking it before a worker or client uses it.

A durable run needs three sets of tables in one PostgreSQL database: RoboZ's thread store
(schema ``roboz``), DBOS's system tables (schema ``dbos``: workflows, steps, queues,
messages) and DBOS's datasource table (the step records committed in the same transaction as
a turn's messages). :func:`migrate` creates or upgrades all of them, idempotently;
``roboz threads migrate --url URL`` calls it. Workers and clients never change the schema:
they refuse a database that is unreachable, lacks a part, or was migrated by a newer
version, in one line naming the server (without its password) and the command to run.
"""

from __future__ import annotations

from typing import Any

from roboz.durable._urls import describe_server, migrate_hint, redacted, sqlalchemy_url
from roboz.durable.errors import DurableSchemaError
from roboz.threads.errors import SchemaVersionError, ThreadStoreError

DBOS_SCHEMA = "dbos"


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def migrate(url: str, *, schema: str = "roboz") -> list[str]:
    """Create or upgrade everything durable runs need at ``url``; one line per part."""
    from dbos import DBOS, SQLAlchemyDatasource

    from roboz.durable.recovery import migrate_workers
    from roboz.threads.postgres import migrate_database

    where = describe_server(url)
    try:
        where, before, after = migrate_database(url, schema=schema)
    except (ThreadStoreError, SchemaVersionError) as error:
        raise DurableSchemaError(str(error)) from None
    lines = [
        f"{where}, schema {schema}: "
        + (
            f"already at thread schema version {after}"
            if before == after
            else f"thread schema version {before} -> {after}"
        )
    ]
    dbos_url = sqlalchemy_url(url)
    try:
        DBOS.migrate(dbos_url, schema=DBOS_SCHEMA)
        SQLAlchemyDatasource.migrate(dbos_url, schema=DBOS_SCHEMA)
    except Exception as error:
        message = _first_line(error).replace(dbos_url, redacted(url))
        raise DurableSchemaError(f"{where}: DBOS migration failed: {message}") from None
    lines.append(f"{where}, schema {DBOS_SCHEMA}: DBOS system and datasource tables ready")
    lines.append(migrate_workers(url, schema=schema))
    return lines


def check(url: str, *, schema: str = "roboz") -> str:
    """Raise DurableSchemaError unless ``url`` is ready for durable runs; returns the server."""
    from roboz.threads._pg_schema import check_version, read_version
    from roboz.threads.postgres import connect

    where = describe_server(url)
    hint = migrate_hint(url) + ("" if schema == "roboz" else f" --schema {schema}")
    try:
        raw = connect(url, where)
    except ThreadStoreError as error:
        raise DurableSchemaError(str(error)) from None
    try:
        try:
            check_version(read_version(raw, schema, where), where, hint)
        except SchemaVersionError as error:
            raise DurableSchemaError(str(error)) from None
        recorded, latest = _dbos_versions(raw)
        if recorded == 0:
            raise DurableSchemaError(
                f"{where} has no DBOS system tables for durable runs; create them with: {hint}"
            )
        if recorded < latest:
            raise DurableSchemaError(
                f"{where} has DBOS system tables of version {recorded}, this RoboZ needs "
                f"{latest}; migrate them with: {hint}"
            )
        if recorded > latest:
            raise DurableSchemaError(
                f"{where} has DBOS system tables of version {recorded}, newer than this RoboZ's "
                f"DBOS knows ({latest}); upgrade roboz[durable] here, or point it at another "
                "database"
            )
    finally:
        raw.close()
    return where


def _dbos_versions(raw: Any) -> tuple[int, int]:
    from dbos._migration import get_dbos_migrations  # pyright: ignore[reportPrivateUsage]

    latest = len(get_dbos_migrations(DBOS_SCHEMA, True, False))
    row = raw.execute("SELECT to_regclass(%s)", (f"{DBOS_SCHEMA}.dbos_migrations",)).fetchone()
    if row[0] is None:
        return 0, latest
    found = raw.execute(f"SELECT version FROM {DBOS_SCHEMA}.dbos_migrations").fetchone()
    return (int(found[0]) if found else 0), latest
