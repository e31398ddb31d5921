"""Conversation snapshots: what is new in each watched run, summarized into a snapshot file.

For each watched thread the sweep compares its message count with the coverage the store
records (one query for all threads); only a thread with new messages is read, and only the
rows after its covered sequence number. A snapshot is made when the new part passes
``threshold_tokens`` or the run has ended (completed, failed, cancelled or interrupted). The
file is written atomically and named after its source, and its coverage is recorded in the
store after it, so a sweep killed in between makes the same file again and never covers a
message twice. Images become URL or numbered markers; none reach the summarizer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from roboz.agent.persistence import message_from_row
from roboz.llm import EndpointLike
from roboz.models import Message, Role
from roboz.runtime.events import Event, emit
from roboz.shed.tools.compaction import transcript
from roboz.shed.tools.maintenance import (
    Maintenance,
    MaintenanceStep,
    ask_summarizer,
    estimate_tokens,
    write_atomically,
)
from roboz.threads import RunInfo, StoredRunMessage, TailRow
from roboz.threads._runs import DRAFT, NOTICE

DEFAULT_NAME = "take_snapshots"

SNAPSHOT_PROMPT = (
    "You keep the long-term memory of an AI agent. Summarize the conversation excerpt you are "
    "given as a snapshot a later run can rely on: standing instructions and preferences the "
    "user gave, decisions and their reasons, facts learned, files and identifiers, work done "
    "and work left open, lessons from failures. Drop chatter and repeated tool output. Image "
    "markers such as [image 1] or [image: URL] stand for images. Reply with the snapshot text "
    "only."
)


@dataclass(frozen=True)
class SnapshotTaken(Event):
    thread_id: str = ""
    first_seq: int = 0
    last_seq: int = 0
    snapshot_id: str = ""


@dataclass(frozen=True)
class SnapshotFailed(Event):
    """The summarizer failed for this thread; its messages stay unsnapshotted for next sweep."""

    thread_id: str = ""
    reason: str = ""


def snapshot_id(thread_id: str, first_seq: int, last_seq: int) -> str:
    return f"{thread_id}.{first_seq}-{last_seq}"


def _messages(rows: list[TailRow]) -> list[Message]:
    messages: list[Message] = []
    for row in rows:
        if row.extras in (NOTICE, DRAFT):
            # What the store said about the run (e.g. it failed or was interrupted).
            blocks = json.loads(row.content)
            texts = [json.loads(b[1]).get("error_message", "") for b in blocks if b[0] == "error"]
            messages.append(Message(role=Role.TOOL, caller="run", content=" ".join(texts)))
            continue
        stored = StoredRunMessage(row.seq, row.extras, "", row.role, row.status, None, row.content)
        message = message_from_row(stored)
        if message is not None:
            messages.append(message)
    return messages


class Snapshots(MaintenanceStep):
    """The snapshot step of one Librarian (build its tool with :meth:`tool`)."""

    instruction = "Snapshot what is new in the watched agents' runs."

    def __init__(
        self,
        maintenance: Maintenance,
        endpoint: EndpointLike | None,
        *,
        threshold_tokens: int = 4000,
        max_snapshot_tokens: int = 1000,
        max_attempts: int = 2,
        timeout_s: float = 120.0,
        name: str = DEFAULT_NAME,
    ) -> None:
        if threshold_tokens < 1 or max_snapshot_tokens < 1 or max_attempts < 1:
            raise ValueError("snapshot thresholds, budgets and attempts must be positive")
        self.endpoint = endpoint
        self.threshold_tokens = threshold_tokens
        self.max_snapshot_tokens = max_snapshot_tokens
        self.max_attempts = max_attempts
        self.timeout_s = timeout_s
        super().__init__(maintenance, name)

    def sweep(self, messages: list[Message]) -> None:
        runs = self.maintenance.runs()
        self.maintenance.began_inactive = not any(map(self.maintenance.is_running, runs))
        for run in runs:
            if run.has_new:
                self._snapshot(run, messages)

    def _snapshot(self, run: RunInfo, record: list[Message]) -> None:
        rows = self.maintenance.store.rows_after(run.thread_id, run.covered_through)
        if not rows:
            return
        excerpt = _messages(rows)
        text = transcript(excerpt)
        ended = not self.maintenance.is_running(run)
        if not ended and estimate_tokens(text) < self.threshold_tokens:
            return
        first, last = rows[0].seq, rows[-1].seq
        source = f"thread {run.thread_id}, messages {first}-{last}"
        try:
            summary = ask_summarizer(
                self.endpoint,
                SNAPSHOT_PROMPT,
                f"Snapshot of {source} (agent {run.agent}):\n\n{text}",
                budget=self.max_snapshot_tokens,
                check=lambda reply: None,
                attempts=self.max_attempts,
                timeout_s=self.timeout_s,
                record=record,
                caller=self.name,
            )
        except Exception as error:  # SummaryRejected, a timeout, the endpoint failing
            emit(SnapshotFailed(thread_id=run.thread_id, reason=f"{type(error).__name__}: {error}"))
            return
        identifier = snapshot_id(run.thread_id, first, last)
        path = self.maintenance.sandbox.snapshots_dir / f"{identifier}.md"
        write_atomically(path, f"Snapshot of {source} (agent {run.agent}).\n\n{summary}\n")
        if self.maintenance.store.record_snapshot(
            identifier,
            project=self.maintenance.project,
            thread_id=run.thread_id,
            first_seq=first,
            last_seq=last,
        ):
            emit(
                SnapshotTaken(
                    thread_id=run.thread_id, first_seq=first, last_seq=last, snapshot_id=identifier
                )
            )
