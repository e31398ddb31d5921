"""``roboz threads migrate``: create or upgrade the thread schema of a PostgreSQL database.

A PostgreSQL thread store never changes its schema itself (many processes on many hosts share
it); this command does, once, before agents or workers start. Running it again is harmless.
"""

from __future__ import annotations

from typing import Annotated

import typer

from roboz.cli.base import App
from roboz.cli.errors import CliError, CliUsageError
from roboz.threads.errors import SchemaVersionError, ThreadStoreError

app = App(help="Manage thread stores shared through PostgreSQL.")

URL_HELP = (
    "The PostgreSQL database: a libpq URL or conninfo string, e.g. "
    "postgresql://roboz@db.internal/roboz or 'host=/run/postgresql dbname=roboz'."
)
SCHEMA_HELP = "The PostgreSQL schema that holds RoboZ's tables."


@app.command("migrate")
def migrate(
    url: Annotated[str, typer.Option("--url", help=URL_HELP, envvar="ROBOZ_THREADS_URL")],
    schema: Annotated[str, typer.Option("--schema", help=SCHEMA_HELP)] = "roboz",
) -> None:
    """Create the thread schema, or migrate it to this RoboZ's version (idempotent)."""
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
    try:
        where, before, after = migrate_database(url, schema=schema)
    except (ThreadStoreError, SchemaVersionError) as error:
        raise CliError(str(error)) from error
    if before == after:
        typer.echo(f"{where}, schema {schema}: already at thread schema version {after}")
    else:
        typer.echo(f"{where}, schema {schema}: thread schema version {before} -> {after}")
