"""The SQLite schema of the thread store, its version check and its migrations."""

from __future__ import annotations

import sqlite3

from roboz.threads.errors import SchemaVersionError

SCHEMA_VERSION = 6

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

_V1_TO_V2 = """
ALTER TABLE messages ADD COLUMN base_revision INTEGER;
ALTER TABLE messages ADD COLUMN block_revisions TEXT;
ALTER TABLE messages ADD COLUMN extras TEXT;
ALTER TABLE threads ADD COLUMN lease_owner TEXT;
ALTER TABLE threads ADD COLUMN lease_pid INTEGER;
ALTER TABLE threads ADD COLUMN lease_start TEXT;
UPDATE threads SET revision = revision + 1;
INSERT INTO resets (thread_id, revision, from_seq) SELECT thread_id, revision, 0 FROM threads;
UPDATE messages SET
    revision = (SELECT t.revision FROM threads t WHERE t.thread_id = messages.thread_id),
    base_revision = (SELECT t.revision FROM threads t WHERE t.thread_id = messages.thread_id)
"""
"""Version 2 keeps, per message, the revision it was created at and the revision each block
was appended at (so a delta sends a growing message's unseen blocks only), a lossless copy of
the RoboZ message it was written from (``extras``), and a run lease per thread. Version 1 did
not know which blocks a client had seen, so every client holding a pre-upgrade token gets one
reset from message 0 and reloads the thread whole."""


_V2_TO_V3 = """
CREATE TABLE snapshots (
    snapshot_id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    created TEXT NOT NULL,
    consolidated_in INTEGER,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX snapshots_by_source ON snapshots (thread_id, first_seq);
CREATE INDEX snapshots_by_project ON snapshots (project, consolidated_in);
CREATE TABLE memory_versions (
    project TEXT NOT NULL,
    version INTEGER NOT NULL,
    created TEXT NOT NULL,
    digest TEXT NOT NULL,
    snapshot_ids TEXT NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (project, version)
) WITHOUT ROWID
"""
"""Version 3 adds the Librarian's ledger: which messages of which thread each snapshot covers
(no foreign key: a snapshot's record outlives the run it summarized, so a deleted run's
coverage is still known) and the versions of each project's memory document. A deleted
snapshot or memory version stays as a tombstone, so what retention removed is never made
again."""


_V3_TO_V4 = """
CREATE TABLE pins (
    user_id TEXT NOT NULL,
    thread_id TEXT NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
    pinned_at TEXT NOT NULL,
    PRIMARY KEY (user_id, thread_id)
) WITHOUT ROWID;
CREATE INDEX pins_by_thread ON pins (thread_id);
CREATE TABLE ratings (
    thread_id TEXT NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
    user_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    rating TEXT NOT NULL,
    comment TEXT,
    created TEXT NOT NULL,
    PRIMARY KEY (thread_id, user_id, seq)
) WITHOUT ROWID;
CREATE TABLE api_tokens (
    token_id TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL,
    user_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    admin INTEGER NOT NULL DEFAULT 0,
    label TEXT,
    created TEXT NOT NULL,
    revoked TEXT
) WITHOUT ROWID
"""
"""Version 4 adds what the thread API keeps per person: personal pins, ratings (of a thread,
``seq`` -1, or of one message) and the bearer tokens of ``roboz serve`` (only a hash of each
secret is stored)."""


_V4_TO_V5 = ""
"""Version 5 changes what two columns mean, not the tables: a run appending to the thread it
holds writes its message row alone, so ``threads.revision`` and ``threads.message_count`` may
lag behind the thread's last row, and the thread's are the larger of the two (read through
``_rows.current``; every other write brings the thread row up to date). A version 4 database
already satisfies that, so nothing is rewritten; the version moves so that an older RoboZ,
which reads the columns alone, refuses the file instead of reusing a sequence number."""


_V5_TO_V6 = """
DROP INDEX IF EXISTS messages_by_revision;
CREATE INDEX IF NOT EXISTS messages_changed ON messages (thread_id, revision)
    WHERE revision > base_revision
"""
"""Version 6 indexes by revision only the messages changed in place after they were written
(a reply growing, marked failed): a delta finds the others from the end of the thread
(``_rows.TAIL_AND_CHANGED_SQL``), so appending a message writes no index page besides its
row's."""


# The script from version N to N + 1 at index N - 1: one per version after the first.
_UPGRADES = (_V1_TO_V2, _V2_TO_V3, _V3_TO_V4, _V4_TO_V5, _V5_TO_V6)
assert len(_UPGRADES) == SCHEMA_VERSION - 1


def _run(conn: sqlite3.Connection, script: str) -> None:
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def ensure_schema(conn: sqlite3.Connection, path: object) -> None:
    """Create the schema in an empty database, migrate an older one, refuse newer ones.

    Runs inside the caller's write transaction, so two processes opening a new file at once
    cannot both create (or migrate) it.
    """
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version == SCHEMA_VERSION:
        return
    if version == 0:
        (tables,) = conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
        ).fetchone()
        if tables:
            raise SchemaVersionError(
                f"{path}: the database has tables but no RoboZ thread schema version; "
                "refusing to use it"
            )
        _run(conn, _SCHEMA_V1)
        version = 1
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{path}: the database has thread schema version {version}, written by a newer "
            f"RoboZ; this RoboZ reads versions up to {SCHEMA_VERSION}. Upgrade RoboZ."
        )
    for script in _UPGRADES[version - 1 :]:
        _run(conn, script)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def schema_version(conn: sqlite3.Connection) -> int:
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    return int(version)


def check_schema_readable(conn: sqlite3.Connection, path: object) -> None:
    """For a read-only store: the file must already hold the current schema."""
    version = schema_version(conn)
    if version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{path}: the database has thread schema version {version}, written by a newer "
            f"RoboZ; this RoboZ reads versions up to {SCHEMA_VERSION}. Upgrade RoboZ."
        )
    raise SchemaVersionError(
        f"{path}: thread schema version {version} needs migrating to {SCHEMA_VERSION}; run "
        f"roboz threads migrate --store {path} (or open the store once writable)"
    )
