"""What only the PostgreSQL store has: the migrate command, clear refusals of a database it
cannot use, and writers in several processes (one run per thread, enforced by the database,
and a dead holder on any host seen through its session)."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from roboz.threads import (
    AgentErrorContent,
    AgentMessage,
    AgentRole,
    RunRow,
    SchemaVersionError,
    ThreadBusyError,
    ThreadStoreError,
)
from roboz.threads._pg_schema import SCHEMA_VERSION
from roboz.threads.postgres import PostgresThreadStore, migrate_database
from tests.cli.helpers import assert_one_line_error, run_cli
from tests.conftest import skip_or_fail
from tests.postgres import CHILD_PRELUDE, Cluster, find_bindir, start_cluster


def test_migrate_creates_the_schema_once_and_then_does_nothing(
    postgres_cluster: Cluster, tmp_path: Path
) -> None:
    schema = postgres_cluster.new_schema()
    first = run_cli(
        "threads", "migrate", "--url", postgres_cluster.url, "--schema", schema, cwd=tmp_path
    )
    assert first.returncode == 0, first.stderr
    assert f"version 0 -> {SCHEMA_VERSION}" in first.stdout
    assert str(postgres_cluster.socket_dir) in first.stdout  # names the server it changed
    again = run_cli(
        "threads", "migrate", "--url", postgres_cluster.url, "--schema", schema, cwd=tmp_path
    )
    assert again.returncode == 0 and "already at thread schema version" in again.stdout
    with PostgresThreadStore(postgres_cluster.url, schema=schema) as store:
        thread = store.create_thread(org_id="o", created_by="u", messages=[AgentMessage.text("hi")])
        assert store.get_thread(thread.thread_id).messages[0].content[0].text == "hi"  # type: ignore[union-attr]


def test_a_database_without_the_schema_says_what_to_run(postgres_cluster: Cluster) -> None:
    schema = postgres_cluster.new_schema()
    with pytest.raises(SchemaVersionError) as error:
        PostgresThreadStore(postgres_cluster.url, schema=schema)
    message = str(error.value)
    assert "no RoboZ thread schema" in message and str(postgres_cluster.socket_dir) in message
    assert f"roboz threads migrate --url '{postgres_cluster.url}' --schema {schema}" in message
    with psycopg.connect(postgres_cluster.url) as raw:  # nothing was created
        assert raw.execute("SELECT to_regnamespace(%s)", (schema,)).fetchone() == (None,)


def _set_version(url: str, schema: str, version: int) -> None:
    with psycopg.connect(url, autocommit=True) as raw:
        raw.execute(f'UPDATE "{schema}".schema_version SET version = %s', (version,))  # type: ignore[arg-type]


def test_a_newer_schema_is_refused_by_the_store_and_by_migrate(
    postgres_cluster: Cluster, tmp_path: Path
) -> None:
    schema = postgres_cluster.new_schema()
    migrate_database(postgres_cluster.url, schema=schema)
    _set_version(postgres_cluster.url, schema, SCHEMA_VERSION + 1)
    with pytest.raises(SchemaVersionError, match="written by a newer RoboZ.*Upgrade RoboZ"):
        PostgresThreadStore(postgres_cluster.url, schema=schema)
    result = run_cli(
        "threads", "migrate", "--url", postgres_cluster.url, "--schema", schema, cwd=tmp_path
    )
    assert_one_line_error(result, 1, "newer RoboZ")
    assert str(postgres_cluster.socket_dir) in result.stderr


def test_an_older_schema_asks_for_the_migration(postgres_cluster: Cluster) -> None:
    schema = postgres_cluster.new_schema()
    migrate_database(postgres_cluster.url, schema=schema)
    _set_version(postgres_cluster.url, schema, 0)
    with pytest.raises(SchemaVersionError, match="migrate it with: roboz threads migrate"):
        PostgresThreadStore(postgres_cluster.url, schema=schema)


def test_a_schema_from_before_the_ledger_is_migrated_keeping_its_threads(
    postgres_cluster: Cluster, tmp_path: Path
) -> None:
    schema = postgres_cluster.new_schema()
    migrate_database(postgres_cluster.url, schema=schema)
    with PostgresThreadStore(postgres_cluster.url, schema=schema) as store:
        thread = store.create_thread(org_id="o", created_by="u", messages=[AgentMessage.text("hi")])
    with psycopg.connect(postgres_cluster.url, autocommit=True) as raw:  # as version 1 left it
        raw.execute(f'DROP TABLE "{schema}".snapshots, "{schema}".memory_versions')  # type: ignore[arg-type]
        # and version 3's (the thread API's) too
        raw.execute(f'DROP TABLE "{schema}".pins, "{schema}".ratings, "{schema}".api_tokens')  # type: ignore[arg-type]
    _set_version(postgres_cluster.url, schema, 1)
    with pytest.raises(SchemaVersionError, match=f"version 1, this RoboZ needs {SCHEMA_VERSION}"):
        PostgresThreadStore(postgres_cluster.url, schema=schema)
    result = run_cli(
        "threads", "migrate", "--url", postgres_cluster.url, "--schema", schema, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert f"version 1 -> {SCHEMA_VERSION}" in result.stdout
    with PostgresThreadStore(postgres_cluster.url, schema=schema) as store:
        assert store.get_thread(thread.thread_id).messages[0].content[0].text == "hi"  # type: ignore[union-attr]
        assert [r.thread_id for r in store.list_runs(["u"])] == [thread.thread_id]
        assert store.record_snapshot(
            "s", project="p", thread_id=thread.thread_id, first_seq=0, last_seq=0
        )
        assert store.record_memory_version("p", 0, "d", ["s"]) == 1


def test_a_wrong_url_is_one_line_naming_the_server(tmp_path: Path) -> None:
    url = f"host={tmp_path} port=5999 dbname=nowhere user=x"
    with pytest.raises(
        ThreadStoreError,
        match=rf"cannot connect to PostgreSQL at {tmp_path}:5999 \(database nowhere\)",
    ):
        PostgresThreadStore(url)
    result = run_cli("threads", "migrate", "--url", url, cwd=tmp_path)
    assert_one_line_error(result, 1, f"cannot connect to PostgreSQL at {tmp_path}:5999")
    garbage = run_cli("threads", "migrate", "--url", "mysql://u:secret@h/db", cwd=tmp_path)
    assert_one_line_error(garbage, 2, "not a PostgreSQL URL")
    assert "secret" not in garbage.stderr
    # libpq would check the port only when connecting, as if the server were down.
    typo = run_cli("threads", "migrate", "--url", "postgresql://u@:notaport/x", cwd=tmp_path)
    assert_one_line_error(typo, 2, "port 'notaport' is not a number")


def test_a_schema_holding_foreign_tables_is_refused(postgres_cluster: Cluster) -> None:
    schema = postgres_cluster.new_schema()
    with psycopg.connect(postgres_cluster.url, autocommit=True) as raw:
        raw.execute(f'CREATE SCHEMA "{schema}"')  # type: ignore[arg-type]
        raw.execute(f'CREATE TABLE "{schema}".threads (x int)')  # type: ignore[arg-type]
    with pytest.raises(SchemaVersionError, match="tables but no RoboZ thread schema version"):
        migrate_database(postgres_cluster.url, schema=schema)
    with pytest.raises(SchemaVersionError, match="tables but no RoboZ thread schema version"):
        PostgresThreadStore(postgres_cluster.url, schema=schema)


@pytest.fixture
def migrated(postgres_cluster: Cluster) -> tuple[str, str]:
    schema = postgres_cluster.new_schema()
    migrate_database(postgres_cluster.url, schema=schema)
    return postgres_cluster.url, schema


WRITER = (
    CHILD_PRELUDE
    + r"""
from roboz.threads import AgentMessage
from roboz.threads.postgres import PostgresThreadStore
url, schema, name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with PostgresThreadStore(url, schema=schema) as store:
    store.get_thread("shared")  # connected
    print("ready", flush=True)
    sys.stdin.readline()  # start together
    for i in range(count):
        store.append_message("shared", AgentMessage.text(f"{name} {i}"))
        store.append_message(f"own-{name}", AgentMessage.text(f"{i}"))
"""
)


def test_writers_in_several_processes_lose_nothing_and_never_interleave_a_sequence(
    migrated: tuple[str, str],
) -> None:
    url, schema = migrated
    names, count = [f"w{i}" for i in range(4)], 40
    with PostgresThreadStore(url, schema=schema) as store:
        store.create_thread(org_id="o", created_by="u", thread_id="shared")
        for name in names:
            store.create_thread(org_id="o", created_by="u", thread_id=f"own-{name}")
        children = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, url, schema, name, str(count)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for name in names
        ]
        for child in children:
            assert child.stdout is not None and child.stdout.readline() == "ready\n"
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.close()
        assert [child.wait(timeout=60) for child in children] == [0] * len(names)
        shared = store.get_thread("shared")
        texts = [m.content[0].text for m in shared.messages]  # type: ignore[union-attr]
        assert len(texts) == len(set(texts)) == count * len(names)
        for name in names:  # each writer's messages in its own order, none lost
            assert [t for t in texts if t.startswith(f"{name} ")] == [
                f"{name} {i}" for i in range(count)
            ]
            own = store.get_thread(f"own-{name}").messages
            assert [m.content[0].text for m in own] == [str(i) for i in range(count)]  # type: ignore[union-attr]
        writers = [t.split()[0] for t in texts]
        switches = sum(a != b for a, b in itertools.pairwise(writers))
        assert switches >= len(names), writers  # they really wrote at the same time
        # A client following by deltas sees the same thread.
        assert store.delta_since("shared", None).messages_by_idx.keys() == set(range(len(texts)))


RUNNER = (
    CHILD_PRELUDE
    + r"""
import time
import roboz.threads._runs as runs
from roboz.threads import RunRow, ThreadBusyError, AgentRole
from roboz.threads.postgres import PostgresThreadStore
url, schema, host = sys.argv[1], sys.argv[2], sys.argv[3]
runs._HOST = host  # as if on another machine: its liveness is the database's to tell
store = PostgresThreadStore(url, schema=schema)
sys.stdin.readline()
try:
    lease, _, _ = store.open_run("race", org_id="o", created_by="u", created_from_agent_id=None)
except ThreadBusyError as error:
    print("busy", error, flush=True)
    sys.exit(0)
print("won", flush=True)
store.append_run_message(lease, RunRow(AgentRole.USER, '[["text", "mine"]]', "{}"))
time.sleep(600)
"""
)


def test_one_run_per_thread_across_processes_and_a_dead_holder_on_another_host_is_seen(
    migrated: tuple[str, str],
) -> None:
    url, schema = migrated
    children = [
        subprocess.Popen(
            [sys.executable, "-c", RUNNER, url, schema, f"host-{i}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    try:
        time.sleep(0.5)
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        lines = [child.stdout.readline().strip() for child in children]  # type: ignore[union-attr]
        assert sorted(line.split()[0] for line in lines) == ["busy"] * 3 + ["won"], lines
        winner = children[[line.split()[0] for line in lines].index("won")]
        assert all(
            "already being run" in line and f"pid {winner.pid}" in line
            for line in lines
            if line != "won"
        )
        with PostgresThreadStore(url, schema=schema) as store:
            with pytest.raises(ThreadBusyError, match="already being run"):
                store.open_run("race", org_id="o", created_by="u", created_from_agent_id=None)
            os.kill(winner.pid, signal.SIGKILL)
            winner.wait(timeout=10)
            # Another host cannot look at the holder's process; its session ending is enough.
            deadline = time.monotonic() + 10
            while True:
                try:
                    lease, rows, _ = store.open_run(
                        "race", org_id="o", created_by="u", created_from_agent_id=None
                    )
                    break
                except ThreadBusyError:
                    assert time.monotonic() < deadline, "the dead holder's lease never ended"
                    time.sleep(0.05)
            assert [r.extras for r in rows][0] == "{}"  # the dead run's committed row is kept
            store.append_run_message(lease, RunRow(AgentRole.USER, '[["text", "next"]]', "{}"))
            store.close_run(lease)
            thread = store.get_thread("race")
            notices = [
                b for m in thread.messages for b in m.content if isinstance(b, AgentErrorContent)
            ]
            assert [n.error_code for n in notices] == ["interrupted"]
            assert [
                m.content[0].text
                for m in thread.messages
                if not isinstance(m.content[0], AgentErrorContent)
            ] == ["mine", "next"]  # type: ignore[union-attr]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
            child.wait()


@pytest.fixture
def own_cluster() -> Iterator[Cluster]:
    """A cluster of this test's own, free to restart."""
    if find_bindir() is None:
        skip_or_fail("PostgreSQL is not installed (apt-get install postgresql)")
    yield from start_cluster()


def test_a_store_outlives_a_server_restart(own_cluster: Cluster) -> None:
    migrate_database(own_cluster.url)
    with PostgresThreadStore(own_cluster.url) as store:
        thread = store.create_thread(org_id="o", created_by="u")
        store.append_message(thread.thread_id, AgentMessage.text("before"))
        running = store.create_thread(org_id="o", created_by="u")
        lease, _, _ = store.open_run(
            running.thread_id, org_id="o", created_by="u", created_from_agent_id=None
        )
        own_cluster.stop()
        with pytest.raises(ThreadStoreError, match=f"PostgreSQL at {own_cluster.socket_dir}"):
            store.append_message(thread.thread_id, AgentMessage.text("while down"))
        own_cluster.start()
        store.append_message(thread.thread_id, AgentMessage.text("after"))  # reconnects
        # The restart dropped the run's lock, but the run lives: it keeps its thread.
        with PostgresThreadStore(own_cluster.url) as other, pytest.raises(ThreadBusyError):
            other.open_run(
                running.thread_id, org_id="o", created_by="u", created_from_agent_id=None
            )
        store.append_run_message(lease, RunRow(AgentRole.USER, '[["text", "on"]]', "{}"))
        store.close_run(lease)
        lease, _, _ = store.open_run(
            thread.thread_id, org_id="o", created_by="u", created_from_agent_id=None
        )
        store.close_run(lease)
        texts = [m.content[0].text for m in store.get_thread(thread.thread_id).messages]  # type: ignore[union-attr]
        assert texts == ["before", "after"]
