"""A Librarian killed with SIGKILL mid-sweep resumes without duplicating or losing a snapshot."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roboz.shed.agents import librarian
from roboz.shed.sandbox import Sandbox
from roboz.threads import SQLiteThreadStore
from tests.shed.memory.conftest import add_run
from tests.shed.memory.summarizer import ScriptedSummarizer

CHILD = r"""
import sys, time
from pathlib import Path
from roboz.shed.agents import librarian
from roboz.shed.sandbox import Sandbox
from tests.shed.memory.summarizer import ScriptedSummarizer, default_reply

root, ready = sys.argv[1], Path(sys.argv[2])

def reply(system, prompt):
    if "thread t1," in prompt:
        ready.write_text("hanging")
        time.sleep(600)
    return default_reply(system, prompt)

runtime, _ = librarian(
    Sandbox(root).scoped("p"), ["worker"], agent_endpoint=ScriptedSummarizer(reply)
).build()
runtime.invoke()
"""


def test_killed_mid_sweep_then_resumed(tmp_path: Path) -> None:
    sandbox = Sandbox(tmp_path).scoped("p").prepare()
    with SQLiteThreadStore(sandbox.run_store) as store:
        for index in range(3):
            add_run(store, f"t{index}", [f"fact: {index}", "more"])
    ready = tmp_path / "ready"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), str(ready)], env=env)
    deadline = time.monotonic() + 30
    while not ready.exists():
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            pytest.fail(f"the Librarian did not reach the stalled summary (exit {child.poll()})")
        time.sleep(0.02)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()

    with SQLiteThreadStore(sandbox.run_store) as store:
        assert [r.thread_id for r in store.list_snapshots("p")] == ["t0"]  # t0 done, t1 not
    summarizer = ScriptedSummarizer()
    runtime, _ = librarian(sandbox, ["worker"], agent_endpoint=summarizer).build()
    stop, _ = runtime.invoke()
    assert "final sweep" in stop.value
    with SQLiteThreadStore(sandbox.run_store) as store:
        records = store.list_snapshots("p")
        assert sorted((r.thread_id, r.first_seq, r.last_seq) for r in records) == [
            ("t0", 0, 1),
            ("t1", 0, 1),
            ("t2", 0, 1),
        ]
        assert all(r.consolidated_in == 1 for r in records)
        (killed, resumed) = store.list_runs(["librarian"])
        assert not killed.active and not resumed.active  # the killed run reads as interrupted
    assert not any(p.startswith("Snapshot of thread t0,") for p in summarizer.prompts)  # not redone
    files = sorted(p.name for p in sandbox.snapshots_dir.iterdir())
    assert files == ["t0.0-1.md", "t1.0-1.md", "t2.0-1.md"]
