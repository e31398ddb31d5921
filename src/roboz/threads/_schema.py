"""The SQLite schema of the thread store and its version check."""

from __future__ import annotations

import sqlite3

from roboz.threads.errors import SchemaVersionError

SCHEMA_VERSION = 1

_SCHEMA_V1 = """
CREATE TABLE threads (
    thread_id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created TEXT NOT NULL,
    origin TEXT,
    meta TEXT NOT NULL,
    status TEXT NOT NULL,
    title TEXT,
    tasks TEXT,
    goals TEXT,
    message_count INTEGER NOT NULL DEFAULT 0,
    revision INTEGER NOT NULL DEFAULT 0,
    status_revision INTEGER NOT NULL DEFAULT 0,
    title_revision INTEGER NOT NULL DEFAULT 0,
    tasks_revision INTEGER NOT NULL DEFAULT 0,
    goals_revision INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX threads_by_org ON threads (org_id, created);
CREATE INDEX threads_by_creator ON threads (created_by, created);
CREATE TABLE messages (
    thread_id TEXT NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    status TEXT NOT NULL,
    created TEXT NOT NULL,
    content TEXT NOT NULL,
    revision INTEGER NOT NULL,
    PRIMARY KEY (thread_id, seq)
) WITHOUT ROWID;
CREATE INDEX messages_by_revision ON messages (thread_id, revision);
CREATE TABLE resets (
    thread_id TEXT NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
    revision INTEGER NOT NULL,
    from_seq INTEGER NOT NULL,
    PRIMARY KEY (thread_id, revision)
) WITHOUT ROWID;
CREATE TABLE compressed (
    thread_id TEXT NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    tier TEXT NOT NULL,
    content TEXT NOT NULL,
    PRIMARY KEY (thread_id, seq, tier)
) WITHOUT ROWID;
"""


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Create the schema in an empty database, accept the current one, refuse others.

    Runs inside the caller's write transaction, so two processes opening a new file at once
    cannot both create it.
    """
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version == SCHEMA_VERSION:
        return
    if version == 0:
        tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[
            0
        ]
        if tables:
            raise SchemaVersionError(
                "the database has tables but no RoboZ thread schema version; refusing to use it"
            )
        for statement in _SCHEMA_V1.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        return
    raise SchemaVersionError(
        f"the database has thread schema version {version}; this RoboZ reads version "
        f"{SCHEMA_VERSION}"
    )
