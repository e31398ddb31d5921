"""Processes seen from the host through /proc, for tests that check what a run left behind."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcStat:
    pid: int
    comm: str
    state: str  # "Z": a zombie, exited and not yet reaped
    ppid: int


def stat(pid: int) -> ProcStat | None:
    """/proc/<pid>/stat, None once the process is gone (the name may hold spaces and ')')."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = text.rsplit(")", 1)[1].split()
    return ProcStat(pid, text[text.index("(") + 1 : text.rindex(")")], rest[0], int(rest[1]))


def processes() -> list[ProcStat]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := stat(int(entry))) is not None:
            found.append(st)
    return found


def children_named(parent: int, comm: str) -> list[int]:
    return [p.pid for p in processes() if p.comm == comm and p.ppid == parent]


def descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1 and (st := stat(pid)) is not None:
        pid = st.ppid
        if pid == ancestor:
            return True
    return False


def gone(pid: int, timeout_s: float = 10.0) -> bool:
    """True once the process has exited (a zombie counts), polling for at most ``timeout_s``;
    this bounds a hang, it measures nothing."""
    deadline = time.monotonic() + timeout_s
    while True:
        st = stat(pid)
        if st is None or st.state == "Z":
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
