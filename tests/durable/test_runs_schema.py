"""A database that cannot serve durable runs is refused in one line naming the server and
what to run; ``roboz threads migrate`` prepares all of it."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from roboz.durable import DurableClient, DurableRuns, DurableSchemaError
from roboz.threads.postgres import migrate_database
from tests.cli.helpers import assert_one_line_error, run_cli
from tests.postgres import Cluster


def refusal(url: str) -> str:
    with pytest.raises(DurableSchemaError) as client_error:
        DurableClient(url)
    # A worker refuses it the same way, before DBOS starts in this process.
    with pytest.raises(DurableSchemaError) as worker_error:
        DurableRuns(url, agents=[]).launch(executor_id="never")
    message = str(client_error.value)
    assert message == str(worker_error.value) and "\n" not in message
    return message


def test_a_wrong_url_names_the_server_without_its_password(tmp_path: Path) -> None:
    url = f"host={tmp_path} port=5999 dbname=nowhere user=x password=secret"
    message = refusal(url)
    assert f"cannot connect to PostgreSQL at {tmp_path}:5999 (database nowhere)" in message
    assert "secret" not in message
    as_url = f"postgresql://x:secret@localhost:1/nowhere?host={tmp_path}"
    assert "secret" not in refusal(as_url)
    with pytest.raises(DurableSchemaError, match="not a PostgreSQL URL"):
        DurableClient("mysql://u:secret@h/db")


def test_a_database_without_the_schema_says_what_to_run(empty_url: str) -> None:
    message = refusal(empty_url)
    assert "no RoboZ thread schema" in message
    assert f"roboz threads migrate --url '{empty_url}'" in message


def test_threads_without_the_dbos_tables_say_what_to_run(empty_url: str) -> None:
    migrate_database(empty_url)
    message = refusal(empty_url)
    assert "no DBOS system tables" in message and "roboz threads migrate --url" in message


def _set_dbos_version(url: str, change: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE dbos.dbos_migrations SET version = version + %s", (change,))


def test_a_newer_thread_schema_is_refused(durable_url: str) -> None:
    with psycopg.connect(durable_url, autocommit=True) as conn:
        conn.execute("UPDATE roboz.schema_version SET version = version + 1")
    assert "newer RoboZ" in refusal(durable_url)


def test_older_and_newer_dbos_tables_are_refused(durable_url: str) -> None:
    _set_dbos_version(durable_url, 1)
    assert "newer than this RoboZ's DBOS knows" in refusal(durable_url)
    _set_dbos_version(durable_url, -2)
    assert "migrate them with: roboz threads migrate" in refusal(durable_url)


def test_threads_migrate_prepares_the_dbos_tables_too(
    postgres_cluster: Cluster, empty_url: str, tmp_path: Path
) -> None:
    result = run_cli("threads", "migrate", "--url", empty_url, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "thread schema version 0 -> " in result.stdout
    assert "schema dbos: DBOS system and datasource tables ready" in result.stdout
    DurableClient(empty_url).close()  # now accepted
    again = run_cli("threads", "migrate", "--url", empty_url, cwd=tmp_path)
    assert again.returncode == 0 and "already at thread schema version" in again.stdout
    skipped = run_cli("threads", "migrate", "--url", empty_url, "--no-durable", cwd=tmp_path)
    assert "dbos" not in skipped.stdout


def test_migrate_to_an_unreachable_server_is_one_line(tmp_path: Path) -> None:
    url = f"host={tmp_path} port=5999 dbname=nowhere user=x password=secret"
    result = run_cli("threads", "migrate", "--url", url, cwd=tmp_path)
    assert_one_line_error(result, 1, f"cannot connect to PostgreSQL at {tmp_path}:5999")
    assert "secret" not in result.stderr
