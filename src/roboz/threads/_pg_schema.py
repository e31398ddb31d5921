"""The PostgreSQL schema of the thread store: versioned migrations, run only on request.

Unlike a SQLite file, which its one user may migrate on open, a PostgreSQL database is shared
by many processes on many hosts, so a store never changes its schema: ``roboz threads migrate``
(:func:`migrate`) does, once, before workers start. Stores refuse a database without the
schema, with an older one or with a newer one, each with one line saying what to run.

The tables live in their own PostgreSQL schema (``roboz`` by default), so they share a
database with the application's (or DBOS's) tables without clashing. The columns match the
SQLite schema's current version, so the shared SQL of ``_base`` runs on both; text that is
sorted or compared (ids, ISO timestamps) uses the "C" collation to sort as SQLite does
whatever the database's locale.
"""

from __future__ import annotations

from typing import Any

from roboz.threads.errors import SchemaVersionError

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE threads (
        thread_id TEXT COLLATE "C" PRIMARY KEY,
        org_id TEXT COLLATE "C" NOT NULL,
        created_by TEXT COLLATE "C" NOT NULL,
        created TEXT COLLATE "C" NOT NULL,
        origin TEXT,
        meta TEXT NOT NULL,
        status TEXT NOT NULL,
        title TEXT,
        tasks TEXT,
        goals TEXT,
        message_count INTEGER NOT NULL DEFAULT 0,
        revision BIGINT NOT NULL DEFAULT 0,
        status_revision BIGINT NOT NULL DEFAULT 0,
        title_revision BIGINT NOT NULL DEFAULT 0,
        tasks_revision BIGINT NOT NULL DEFAULT 0,
        goals_revision BIGINT NOT NULL DEFAULT 0,
        lease_owner TEXT,
        lease_pid INTEGER,
        lease_start TEXT
    );
    CREATE INDEX threads_by_org ON threads (org_id, created);
    CREATE INDEX threads_by_creator ON threads (created_by, created);
    CREATE TABLE messages (
        thread_id TEXT COLLATE "C" NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        role TEXT NOT NULL,
        status TEXT NOT NULL,
        created TEXT NOT NULL,
        content TEXT NOT NULL,
        revision BIGINT NOT NULL,
        base_revision BIGINT,
        block_revisions TEXT,
        extras TEXT,
        PRIMARY KEY (thread_id, seq)
    );
    CREATE INDEX messages_by_revision ON messages (thread_id, revision);
    CREATE TABLE resets (
        thread_id TEXT COLLATE "C" NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
        revision BIGINT NOT NULL,
        from_seq INTEGER NOT NULL,
        PRIMARY KEY (thread_id, revision)
    );
    CREATE TABLE compressed (
        thread_id TEXT COLLATE "C" NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        tier TEXT NOT NULL,
        content TEXT NOT NULL,
        PRIMARY KEY (thread_id, seq, tier)
    )
    """,
    # The Librarian's ledger (as SQLite's version 3): no foreign key to threads, since a
    # snapshot's record outlives the run it summarized.
    """
    CREATE TABLE snapshots (
        snapshot_id TEXT COLLATE "C" PRIMARY KEY,
        project TEXT COLLATE "C" NOT NULL,
        thread_id TEXT COLLATE "C" NOT NULL,
        first_seq INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        created TEXT COLLATE "C" NOT NULL,
        consolidated_in INTEGER,
        deleted INTEGER NOT NULL DEFAULT 0
    );
    CREATE UNIQUE INDEX snapshots_by_source ON snapshots (thread_id, first_seq);
    CREATE INDEX snapshots_by_project ON snapshots (project, consolidated_in);
    CREATE TABLE memory_versions (
        project TEXT COLLATE "C" NOT NULL,
        version INTEGER NOT NULL,
        created TEXT COLLATE "C" NOT NULL,
        digest TEXT NOT NULL,
        snapshot_ids TEXT NOT NULL,
        deleted INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (project, version)
    )
    """,
    # What the thread API keeps per person (as SQLite's version 4): pins, ratings, and the
    # bearer tokens of `roboz serve` (a hash of each secret only).
    """
    CREATE TABLE pins (
        user_id TEXT COLLATE "C" NOT NULL,
        thread_id TEXT COLLATE "C" NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
        pinned_at TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (user_id, thread_id)
    );
    CREATE INDEX pins_by_thread ON pins (thread_id);
    CREATE TABLE ratings (
        thread_id TEXT COLLATE "C" NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
        user_id TEXT COLLATE "C" NOT NULL,
        seq INTEGER NOT NULL,
        rating TEXT NOT NULL,
        comment TEXT,
        created TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (thread_id, user_id, seq)
    );
    CREATE TABLE api_tokens (
        token_id TEXT COLLATE "C" PRIMARY KEY,
        secret_hash TEXT NOT NULL,
        user_id TEXT COLLATE "C" NOT NULL,
        org_id TEXT COLLATE "C" NOT NULL,
        admin INTEGER NOT NULL DEFAULT 0,
        label TEXT,
        created TEXT COLLATE "C" NOT NULL,
        revoked TEXT
    )
    """,
)
"""Migration N (from index 0) takes the schema from version N to N + 1. Append, never edit."""

SCHEMA_VERSION = len(MIGRATIONS)

_MIGRATE_LOCK = 0x526F425A  # "RoBZ": one migration at a time, whoever runs it


def _statements(script: str) -> list[str]:
    return [statement for statement in script.split(";") if statement.strip()]


def read_version(conn: Any, schema: str, where: str) -> int | None:
    """The schema version recorded in ``schema``, or None when there is no RoboZ schema."""
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL, to_regnamespace(%s) IS NOT NULL",
        (f'"{schema}".schema_version', schema),
    ).fetchone()
    if not row[0]:
        if (
            row[1]
            and conn.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (schema,)
            ).fetchone()[0]
        ):
            raise SchemaVersionError(
                f"{where}: schema {schema!r} has tables but no RoboZ thread schema version; "
                "refusing to use it (name another schema with --schema)"
            )
        return None
    found = conn.execute(f'SELECT max(version) FROM "{schema}".schema_version').fetchone()[0]
    return int(found or 0)


def check_version(version: int | None, where: str, migrate_hint: str) -> None:
    """Refuse a database a store cannot use as it is, saying what to run."""
    if version == SCHEMA_VERSION:
        return
    if version is None:
        raise SchemaVersionError(
            f"{where} has no RoboZ thread schema; create it with: {migrate_hint}"
        )
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{where} has thread schema version {version}, written by a newer RoboZ; this "
            f"RoboZ reads version {SCHEMA_VERSION}. Upgrade RoboZ."
        )
    raise SchemaVersionError(
        f"{where} has thread schema version {version}, this RoboZ needs {SCHEMA_VERSION}; "
        f"migrate it with: {migrate_hint}"
    )


def migrate(conn: Any, schema: str, where: str) -> tuple[int, int]:
    """Bring ``schema`` to SCHEMA_VERSION in one transaction; returns (before, after).

    ``conn`` is an autocommit psycopg connection. Concurrent migrations queue on an advisory
    lock, so the second finds the work done.
    """
    conn.execute("BEGIN")
    try:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATE_LOCK,))
        before = read_version(conn, schema, where)
        if before is not None and before > SCHEMA_VERSION:
            check_version(before, where, "")
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        conn.execute(f'SET LOCAL search_path TO "{schema}"')
        if before is None:
            conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
            conn.execute("INSERT INTO schema_version (version) VALUES (0)")
        start = before or 0
        for script in MIGRATIONS[start:]:
            for statement in _statements(script):
                conn.execute(statement)
        conn.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION,))
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return start, SCHEMA_VERSION
