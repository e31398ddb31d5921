"""``roboz threads migrate``: create or upgrade the thread schema of a PostgreSQL database.

A PostgreSQL thread store never changes its schema itself (many processes on many hosts share
it); this command does, once, before agents or workers start. Running it again is harmless.
With ``roboz[durable]`` installed it also prepares the tables of durable runs (DBOS's system
and datasource tables, see ``roboz.durable.schema``), unless ``--no-durable``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from roboz.cli.base import App
from roboz.cli.errors import CliError, CliUsageError
from roboz.cli.threads_store import url_beside

app = App(
    help="Threads: read a store directly (--store PATH, or --url of PostgreSQL), work with "
    "the threads of a roboz serve (--url http://...), or migrate a PostgreSQL store."
)

URL_HELP = (
    "The PostgreSQL database: a libpq URL or conninfo string, e.g. "
    "postgresql://roboz@db.internal/roboz or 'host=/run/postgresql dbname=roboz'."
)
SCHEMA_HELP = "The PostgreSQL schema that holds RoboZ's tables."
DURABLE_HELP = (
    "Also create or upgrade the tables of durable runs (DBOS's, schema dbos); the default "
    "when roboz[durable] is installed."
)


def _durable_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("dbos") is not None


@app.command("migrate")
def migrate(
    url: Annotated[
        str | None,
        typer.Option("--url", help=URL_HELP, envvar="ROBOZ_THREADS_URL", show_default=False),
    ] = None,
    store: Annotated[
        Path | None,
        typer.Option(
            "--store",
            help="A SQLite thread store to migrate (it also migrates when a run opens it).",
            show_default=False,
        ),
    ] = None,
    schema: Annotated[str, typer.Option("--schema", help=SCHEMA_HELP)] = "roboz",
    durable: Annotated[
        bool | None, typer.Option("--durable/--no-durable", help=DURABLE_HELP)
    ] = None,
) -> None:
    """Create the thread schema, or migrate it to this RoboZ's version (idempotent)."""
    # Imported here: `roboz --help` should not pay for the thread stores.
    from roboz.threads.errors import SchemaVersionError, ThreadStoreError

    if store is not None:
        url_beside(store, url, "ROBOZ_THREADS_URL")  # both on the command line: refused
        _migrate_sqlite(store)
        return
    if url is None:
        raise CliUsageError("give --url (PostgreSQL) or --store PATH (SQLite)")

    try:
        from roboz.threads.postgres import describe, migrate_database
    except ImportError as error:  # pragma: no cover - psycopg is a dependency of the extra
        raise CliError(f"{error}; install roboz[postgres]") from error
    try:
        describe(url)
    except ThreadStoreError as error:
        raise CliUsageError(str(error)) from error
    if not schema.isidentifier() or schema != schema.lower():
        raise CliUsageError(f"--schema must be a plain lower-case SQL name, not {schema!r}")
    if durable is None:
        durable = _durable_installed()
    if durable:
        _migrate_durable(url, schema)
        return
    try:
        where, before, after = migrate_database(url, schema=schema)
    except (ThreadStoreError, SchemaVersionError) as error:
        raise CliError(str(error)) from error
    if before == after:
        typer.echo(f"{where}, schema {schema}: already at thread schema version {after}")
    else:
        typer.echo(f"{where}, schema {schema}: thread schema version {before} -> {after}")


def _migrate_sqlite(path: Path) -> None:
    from roboz.cli.threads_store import check_sqlite_store, sqlite_schema_version
    from roboz.threads import SchemaVersionError, SQLiteThreadStore, ThreadStoreError

    check_sqlite_store(path)
    before = sqlite_schema_version(path)
    try:
        SQLiteThreadStore(path).close()  # opening it writable migrates it
    except (SchemaVersionError, ThreadStoreError) as error:
        raise CliError(str(error)) from None
    after = sqlite_schema_version(path)
    if before == after:
        typer.echo(f"{path}: already at thread schema version {after}")
    else:
        typer.echo(f"{path}: thread schema version {before} -> {after}")


def _migrate_durable(url: str, schema: str) -> None:
    try:
        from roboz.durable import DurableError, migrate
    except ImportError as error:
        raise CliError(f"{error}; install roboz[durable]") from error
    try:
        lines = migrate(url, schema=schema)
    except DurableError as error:
        raise CliError(str(error)) from error
    for line in lines:
        typer.echo(line)
