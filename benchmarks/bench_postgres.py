"""PostgreSQL thread store beside the SQLite one: appends, an append followed by a delta, and
four writers in one process, each on its own thread (SQLite queues them on its one file lock,
PostgreSQL locks per thread, but in one Python process the client's own CPU time decides).

Both stores run in the same process on the same machine; the PostgreSQL server is a
throwaway cluster on a Unix socket with fsync off (as in the tests), so the figures compare
the stores' own costs, not disks or networks.
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from roboz.threads import AgentMessage, SQLiteThreadStore


def _appends(store: Any, count: int) -> float:
    thread_id = store.create_thread(org_id="bench", created_by="bench").thread_id
    started = time.perf_counter()
    for i in range(count):
        store.append_message(thread_id, AgentMessage.text(f"message {i}"))
    return (time.perf_counter() - started) / count


def _append_and_delta(store: Any, count: int) -> float:
    thread_id = store.create_thread(org_id="bench", created_by="bench").thread_id
    token = store.get_thread(thread_id).continuation_token
    started = time.perf_counter()
    for i in range(count):
        store.append_message(thread_id, AgentMessage.text(f"message {i}"))
        token = store.delta_since(thread_id, token).continuation_token
    return (time.perf_counter() - started) / count


def _parallel(store: Any, writers: int, count: int) -> float:
    """Messages per second, ``writers`` Python threads each appending to its own thread."""
    ids = [
        store.create_thread(org_id="bench", created_by="bench").thread_id for _ in range(writers)
    ]
    start = threading.Barrier(writers + 1)

    def write(thread_id: str) -> None:
        start.wait()
        for i in range(count):
            store.append_message(thread_id, AgentMessage.text(f"message {i}"))

    workers = [threading.Thread(target=write, args=(t,)) for t in ids]
    for worker in workers:
        worker.start()
    start.wait()
    started = time.perf_counter()
    for worker in workers:
        worker.join()
    return writers * count / (time.perf_counter() - started)


def main(quick: bool = False) -> None:
    try:
        from tests.postgres import find_bindir, start_cluster
    except ImportError:
        print("skipped: run from a clone (the cluster helper lives in tests/postgres.py)")
        return
    if find_bindir() is None:
        print("skipped: PostgreSQL is not installed (apt-get install postgresql)")
        return
    from roboz.threads.postgres import PostgresThreadStore, migrate_database

    count = 100 if quick else 1_000
    clusters = start_cluster()
    cluster = next(clusters)
    try:
        migrate_database(cluster.url)
        with tempfile.TemporaryDirectory(prefix="roboz-bench-pg-") as name:
            sqlite = SQLiteThreadStore(Path(name) / "threads.db")
            postgres = PostgresThreadStore(cluster.url)
            figures = {
                label: (
                    _appends(store, count),
                    _append_and_delta(store, count // 5),
                    _parallel(store, 4, count // 4),
                )
                for label, store in (("sqlite", sqlite), ("postgres", postgres))
            }
            sqlite.close()
            postgres.close()
    finally:
        clusters.close()
    (sa, sd, sp), (pa, pd, pp) = figures["sqlite"], figures["postgres"]
    print(f"append_message: postgres {pa * 1e3:.2f} ms, sqlite {sa * 1e3:.2f} ms ({pa / sa:.1f}x)")
    print(
        f"append then delta_since: postgres {pd * 1e3:.2f} ms, sqlite {sd * 1e3:.2f} ms "
        f"({pd / sd:.1f}x)"
    )
    print(
        f"4 writers, one thread each: postgres {pp:,.0f} msg/s, sqlite {sp:,.0f} msg/s "
        f"({pp / sp:.2f}x)"
    )
