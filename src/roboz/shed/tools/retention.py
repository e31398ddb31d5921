"""Artifact retention: runs, snapshots and memory versions kept by count and age.

Only what is safe goes: a watched run that is not active and that snapshots cover to its
last message (and the Librarian's own ended runs, which only hold its summary prompts); a
snapshot a memory version took in; a memory version that is not the latest.
Newest first, the first ``max_*`` are kept and anything older than ``max_*_age_s`` goes.
Deleting is idempotent (a file already gone is fine) and leaves a tombstone in the store, so
a snapshot of a deleted run is never made again. Files in the snapshot and memory directories
that no live record names (left by a sweep killed between writing and recording) go too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from roboz.models import Message
from roboz.runtime.events import Event, emit
from roboz.shed.tools.consolidation import memory_path, snapshot_path
from roboz.shed.tools.maintenance import Maintenance, MaintenanceStep
from roboz.threads.record import utc_now

DEFAULT_NAME = "apply_retention"

T = TypeVar("T")


@dataclass(frozen=True)
class ArtifactsDeleted(Event):
    runs: tuple[str, ...] = ()
    snapshots: tuple[str, ...] = ()
    memory_versions: tuple[int, ...] = ()
    files: int = 0


def _over(
    items: Sequence[T], created: Sequence[str], keep: int | None, max_age_s: float | None
) -> list[T]:
    """Of ``items`` (oldest first), those beyond the newest ``keep`` or older than the age."""
    cutoff = utc_now() - timedelta(seconds=max_age_s) if max_age_s is not None else None
    doomed: list[T] = []
    for index, (item, when) in enumerate(zip(items, created, strict=True)):
        newer = len(items) - 1 - index
        if (keep is not None and newer >= keep) or (
            cutoff is not None and datetime.fromisoformat(when) < cutoff
        ):
            doomed.append(item)
    return doomed


class Retention(MaintenanceStep):
    """The retention step of one Librarian (build its tool with :meth:`tool`)."""

    instruction = "Delete old runs, snapshots and memory versions that are safe to go."

    def __init__(
        self,
        maintenance: Maintenance,
        *,
        max_runs: int | None = 200,
        max_run_age_s: float | None = None,
        max_snapshots: int | None = 200,
        max_snapshot_age_s: float | None = None,
        max_memory_versions: int | None = 10,
        max_memory_age_s: float | None = None,
        name: str = DEFAULT_NAME,
    ) -> None:
        for label, value in (
            ("max_runs", max_runs),
            ("max_snapshots", max_snapshots),
            ("max_memory_versions", max_memory_versions),
        ):
            if value is not None and value < 1:
                raise ValueError(f"{label} must be at least 1 (or None for no limit)")
        self.limits = (
            (max_runs, max_run_age_s),
            (max_snapshots, max_snapshot_age_s),
            (max_memory_versions, max_memory_age_s),
        )
        super().__init__(maintenance, name)

    def sweep(self, messages: list[Message]) -> None:
        maintenance, store = self.maintenance, self.maintenance.store
        sandbox, project = maintenance.sandbox, maintenance.project
        (run_keep, run_age), (snap_keep, snap_age), (mem_keep, mem_age) = self.limits
        safe = [r for r in maintenance.runs() if not maintenance.is_running(r) and not r.has_new]
        doomed = _over(safe, [r.created for r in safe], run_keep, run_age)
        if maintenance.own is not None:  # its own ended runs hold only its summary prompts
            own = [r for r in store.list_runs([maintenance.own]) if not r.active]
            doomed += _over(own, [r.created for r in own], run_keep, run_age)
        runs = [r.thread_id for r in doomed if store.delete_run(r.thread_id)]
        records = store.list_snapshots(project)
        done = [r for r in records if r.consolidated_in is not None and not r.deleted]
        snapshots = [
            r.snapshot_id for r in _over(done, [r.created for r in done], snap_keep, snap_age)
        ]
        versions = [v for v in store.list_memory_versions(project) if not v.deleted]
        older = versions[:-1]  # the latest is always kept
        memory = _over(
            older, [v.created for v in older], None if mem_keep is None else mem_keep - 1, mem_age
        )
        files = 0
        for snapshot in snapshots:
            snapshot_path(sandbox, snapshot).unlink(missing_ok=True)
        for version in memory:
            memory_path(sandbox, version).unlink(missing_ok=True)
        if snapshots or memory:
            store.forget_artifacts(
                project, snapshot_ids=snapshots, memory_versions=[v.version for v in memory]
            )
        live_snapshots = {f"{r.snapshot_id}.md" for r in records if not r.deleted} - {
            f"{s}.md" for s in snapshots
        }
        kept = set(memory)
        live_memory = {memory_path(sandbox, v).name for v in versions if v not in kept}
        for directory, live in (
            (sandbox.snapshots_dir, live_snapshots),
            (sandbox.memory_dir, live_memory),
        ):
            if not directory.is_dir():
                continue
            for path in directory.iterdir():
                if path.is_file() and path.name not in live and path.name.endswith((".md", ".tmp")):
                    path.unlink(missing_ok=True)
                    files += 1
        if runs or snapshots or memory or files:
            emit(
                ArtifactsDeleted(
                    runs=tuple(runs),
                    snapshots=tuple(snapshots),
                    memory_versions=tuple(v.version for v in memory),
                    files=files,
                )
            )
