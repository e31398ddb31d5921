"""`roboz threads list|show|export|delete --store PATH | --url POSTGRES`: a store opened
directly by its operator, and every file that is not a usable store named with the next step,
left as it was."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from roboz.threads import (
    AgentMessage,
    AgentMessageStatus,
    AgentRole,
    AgentTextContent,
    AgentThreadRecord,
    SQLiteThreadStore,
)
from tests.cli.helpers import assert_one_line_error, run_cli


def _fill(store: Any, messages: int = 2) -> list[str]:
    ids = []
    for title in ("cats", "dogs"):
        record = store.create_thread(title=title, org_id="acme", created_by="jo")
        for n in range(messages):
            text = f"{title} message {n} " + "x" * 200
            store.append_message(
                record.thread_id,
                AgentMessage(
                    role=AgentRole.USER,
                    status=AgentMessageStatus.COMPLETED,
                    content=[AgentTextContent(text=text)],
                ),
            )
        ids.append(record.thread_id)
    return ids


@pytest.fixture
def sqlite_store(tmp_path: Path) -> tuple[Path, list[str]]:
    path = tmp_path / "threads.db"
    with SQLiteThreadStore(path) as store:
        ids = _fill(store)
    return path, ids


def test_list_show_and_export_read_a_sqlite_store(
    tmp_path: Path, sqlite_store: tuple[Path, list[str]]
) -> None:
    path, (cats, dogs) = sqlite_store
    listed = run_cli("threads", "list", "--store", str(path), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert cats in listed.stdout and dogs in listed.stdout and "cats" in listed.stdout

    shown = run_cli("threads", "show", cats, "--store", str(path), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    record = AgentThreadRecord.model_validate_json(shown.stdout)
    assert record.title == "cats" and len(record.messages) == 2

    exported = run_cli("threads", "export", "--store", str(path), cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    lines = exported.stdout.splitlines()
    records = [AgentThreadRecord.model_validate_json(line) for line in lines]
    assert {r.thread_id for r in records} == {cats, dogs}
    assert all(len(r.messages) == 2 for r in records)

    one = run_cli("threads", "export", dogs, "--store", str(path), cwd=tmp_path)
    assert [json.loads(line)["thread_id"] for line in one.stdout.splitlines()] == [dogs]


def test_delete_removes_one_thread_and_a_missing_one_changes_nothing(
    tmp_path: Path, sqlite_store: tuple[Path, list[str]]
) -> None:
    path, (cats, dogs) = sqlite_store
    done = run_cli("threads", "delete", cats, "--store", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    missing = run_cli("threads", "delete", "no-such-thread", "--store", str(path), cwd=tmp_path)
    assert_one_line_error(missing, 2, "no thread 'no-such-thread'")
    with SQLiteThreadStore(path, read_only=True) as store:
        assert [t.thread_id for t in store.list_threads()] == [dogs]
        assert len(store.get_thread(dogs).messages) == 2


@pytest.mark.parametrize("kind", ["missing", "no-folder", "folder", "not-sqlite", "foreign"])
def test_what_is_not_a_store_is_named_with_the_next_step_and_left_alone(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "threads.db"
    expected = {
        "missing": (2, "no such thread store; check the path"),
        "no-folder": (2, "does not exist; check the path"),
        "folder": (2, "is a folder"),
        "not-sqlite": (2, "not a SQLite database"),
        "foreign": (2, "without RoboZ's thread tables"),
    }[kind]
    if kind == "no-folder":
        path = tmp_path / "nowhere" / "threads.db"
    elif kind == "folder":
        path.mkdir()
    elif kind == "not-sqlite":
        path.write_bytes(b"name,age\njo,3\n")
    elif kind == "foreign":
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE recipes (name TEXT)")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    content = path.read_bytes() if path.is_file() else None
    for command in (["list"], ["export"], ["show", "t1"], ["delete", "t1"]):
        result = run_cli("threads", *command, "--store", str(path), cwd=tmp_path)
        assert_one_line_error(result, expected[0], expected[1])
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing created
    if content is not None:
        assert path.read_bytes() == content


def test_a_damaged_store_says_so_and_how_to_recover(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    with SQLiteThreadStore(path) as store:
        _fill(store, messages=300)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    half = len(data) // 2 // 4096 * 4096
    data[half : half + 4096] = b"\xff" * 4096  # a page of the messages, overwritten
    path.write_bytes(bytes(data))
    result = run_cli("threads", "export", "--store", str(path), cwd=tmp_path)
    assert_one_line_error(result, 1, "damaged")
    assert ".recover" in result.stderr and "backup" in result.stderr


def test_usage_errors(tmp_path: Path, sqlite_store: tuple[Path, list[str]]) -> None:
    path, _ = sqlite_store
    env = {"ROBOZ_SERVER_URL": "", "ROBOZ_TOKEN": ""}
    assert_one_line_error(run_cli("threads", "list", cwd=tmp_path, env=env), 2, "--store PATH")
    assert_one_line_error(
        run_cli("threads", "list", "--url", "http://127.0.0.1:9", cwd=tmp_path, env=env),
        2,
        "needs --token",
    )
    both = run_cli(
        "threads", "list", "--store", str(path), "--url", "host=/tmp", cwd=tmp_path, env=env
    )
    assert_one_line_error(both, 2, "not both")
    other = run_cli("threads", "export", "--url", "ftp://x", cwd=tmp_path, env=env)
    assert_one_line_error(other, 2, "a roboz serve (http://...) or a PostgreSQL database")
    pinned = run_cli("threads", "list", "--store", str(path), "--pinned", cwd=tmp_path, env=env)
    assert_one_line_error(pinned, 2, "for a server")
    # A server URL in the environment does not stand in the way of a store on the line.
    served = {"ROBOZ_SERVER_URL": "http://127.0.0.1:9", "ROBOZ_TOKEN": ""}
    assert (
        run_cli("threads", "list", "--store", str(path), cwd=tmp_path, env=served).returncode == 0
    )


def test_a_postgres_store_is_read_and_changed_directly(tmp_path: Path, postgres_url: str) -> None:
    from roboz.threads.postgres import PostgresThreadStore, migrate_database

    migrate_database(postgres_url, schema="clistore")
    with PostgresThreadStore(postgres_url, schema="clistore") as store:
        cats, dogs = _fill(store)
    where = ["--url", postgres_url, "--schema", "clistore"]
    exported = run_cli("threads", "export", *where, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert {json.loads(line)["thread_id"] for line in exported.stdout.splitlines()} == {
        cats,
        dogs,
    }
    assert run_cli("threads", "delete", cats, *where, cwd=tmp_path).returncode == 0
    listed = run_cli("threads", "list", *where, cwd=tmp_path)
    assert dogs in listed.stdout and cats not in listed.stdout


def test_an_older_store_is_refused_until_migrated_and_loses_nothing(
    tmp_path: Path, sqlite_store: tuple[Path, list[str]]
) -> None:
    path, ids = sqlite_store
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 4")  # the last version before this RoboZ's
    listed = run_cli("threads", "list", "--store", str(path), cwd=tmp_path)
    assert_one_line_error(listed, 1, f"run roboz threads migrate --store {path}")
    # A PostgreSQL URL in the environment does not stand in the way of --store either.
    pg_env = {"ROBOZ_THREADS_URL": "host=/nowhere dbname=x"}
    migrated = run_cli("threads", "migrate", "--store", str(path), cwd=tmp_path, env=pg_env)
    assert migrated.returncode == 0, migrated.stderr
    assert "thread schema version 4 -> " in migrated.stdout
    again = run_cli("threads", "migrate", "--store", str(path), cwd=tmp_path)
    assert "already at thread schema version" in again.stdout
    exported = run_cli("threads", "export", "--store", str(path), cwd=tmp_path)
    assert {json.loads(line)["thread_id"] for line in exported.stdout.splitlines()} == set(ids)


def test_both_on_the_command_line_is_refused_and_the_environment_gives_way(
    tmp_path: Path, sqlite_store: tuple[Path, list[str]]
) -> None:
    path, _ = sqlite_store
    pg_env = {"ROBOZ_THREADS_URL": "host=/nowhere dbname=x"}
    tokens = run_cli("serve", "tokens", "list", "--store", str(path), cwd=tmp_path, env=pg_env)
    assert tokens.returncode == 0, tokens.stderr
    for command in (["threads", "migrate"], ["serve", "tokens", "list"]):
        both = run_cli(*command, "--store", str(path), "--url", "host=/x", cwd=tmp_path)
        assert_one_line_error(both, 2, "not both")
