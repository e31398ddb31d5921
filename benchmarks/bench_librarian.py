"""The Librarian's sweep over 100 watched threads: with nothing new (a few queries that read no
message, so the same with 1,000 or 10 messages per thread) and with one new message in each,
beside the public anchor's pattern (re-reading every thread whole on each sweep)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from roboz.agent.rows import thread_row
from roboz.models import Message, Role
from roboz.shed.sandbox import Sandbox
from roboz.shed.tools.consolidation import Consolidation
from roboz.shed.tools.maintenance import Maintenance
from roboz.shed.tools.retention import Retention
from roboz.shed.tools.snapshots import Snapshots

THREADS = 100


class Summarizer:
    """An instant summarizer: the benchmark measures the Librarian, not a model."""

    accepts_images = False
    messages_scrubber = None
    model_name = name = "bench"
    max_context_tokens = 10**6

    def complete(self, records, *, on_delta=None, cancel=None):  # type: ignore[no-untyped-def]
        from roboz.llm.endpoint import Completion
        from roboz.shed.tools.consolidation import SECTIONS

        text = "\n".join(f"## {name}\n-" for name in SECTIONS)
        return Completion(text=text, model="bench")


def _setup(root: Path, messages: int) -> tuple[Maintenance, list[Snapshots]]:
    sandbox = Sandbox(root).scoped("bench").prepare()
    maintenance = Maintenance(sandbox, ("worker",))
    store = maintenance.store
    rows = [
        thread_row(Message(role=Role.USER, content=f"message {i} " * 8), i, None, 0)
        for i in range(messages)
    ]
    for index in range(THREADS):
        lease, _, _ = store.open_run(
            f"t{index}",
            org_id="local",
            created_by="worker",
            created_from_agent_id="worker",
            initial=rows,
        )
        store.close_run(lease)
    endpoint = Summarizer()
    snapshots = Snapshots(maintenance, endpoint, threshold_tokens=1)  # type: ignore[arg-type]
    Consolidation(maintenance, endpoint, max_batch=THREADS)  # type: ignore[arg-type]
    Retention(maintenance, max_runs=None, max_snapshots=None, max_memory_versions=None)
    maintenance.sweep([])  # snapshot and consolidate everything once
    return maintenance, [snapshots]


def _best(function, repeats: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def main(quick: bool = False) -> int:
    repeats = 3 if quick else 10
    with tempfile.TemporaryDirectory() as long_dir, tempfile.TemporaryDirectory() as short_dir:
        long, _ = _setup(Path(long_dir), 1000)
        short, _ = _setup(Path(short_dir), 10)
        idle_long = _best(lambda: long.sweep([]), repeats)
        idle_short = _best(lambda: short.sweep([]), repeats)
        store = long.store
        reread = _best(
            lambda: [store.get_thread(f"t{i}", with_tasks_and_goals=False) for i in range(THREADS)],
            max(1, repeats // 3),
        )
        print(
            f"sweep, nothing new, {THREADS} x 1,000 messages: {idle_long * 1000:.1f} ms (target < 50)"
        )
        print(f"sweep, nothing new, {THREADS} x 10 messages:    {idle_short * 1000:.1f} ms")
        print(
            f"  ratio 1,000 / 10 messages per thread: {idle_long / idle_short:.2f}x (O(threads): ~1)"
        )
        print(
            f"anchor pattern, re-reading every thread whole: {reread * 1000:.1f} ms "
            f"({reread / idle_long:.0f}x the idle sweep)"
        )
        for index in range(THREADS):
            lease, _, _ = store.open_run(
                f"t{index}", org_id="local", created_by="worker", created_from_agent_id="worker"
            )
            row = thread_row(Message(role=Role.USER, content="one more"), 0, None, 0)
            store.append_run_message(lease, row)
            store.close_run(lease)
        started = time.perf_counter()
        long.sweep([])
        one_new = time.perf_counter() - started
        print(
            f"sweep, one new message in each of {THREADS} threads (100 snapshots, 1 "
            f"consolidation): {one_new * 1000:.1f} ms"
        )
        long.store.close()
        short.store.close()
    return 0 if idle_long < 0.05 else 1


if __name__ == "__main__":
    raise SystemExit(main())
