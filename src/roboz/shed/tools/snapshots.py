"""Conversation snapshots: what is new in each watched run, summarized into a snapshot file.

For each watched thread the sweep compares its message count with the coverage the store
records (one query for all threads); only a thread with new messages is read, and only the
rows after its covered sequence number. A snapshot is made when the new part passes
``threshold_tokens`` or the run has ended (completed, failed, cancelled or interrupted). The
file is written atomically and named after its source, and its coverage is recorded in the
store after it, so a sweep killed in between makes the same file again and never covers a
message twice. Images become URL or numbered markers; none reach the summarizer.

Every row the store accepts can be snapshotted, also one written outside an agent run (a
message a client appended, a fork's copies): those carry no RoboZ message, so their stored
blocks are read as text. A thread whose snapshot fails for any reason is reported
(SnapshotFailed) and left for the next sweep; the other threads are still snapshotted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from roboz.agent.rows import message_from_row
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
from roboz.threads import (
    AgentClientContextEntry,
    AgentErrorContent,
    AgentTextContent,
    AgentToolResultContent,
    AgentToolUseContent,
    RunInfo,
    StoredRunMessage,
    TailRow,
)
from roboz.threads._runs import DRAFT, NOTICE
from roboz.threads.content import decode_blocks

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
    """This thread's snapshot failed (the summarizer, or reading its rows); its messages stay
    unsnapshotted for the next sweep."""

    thread_id: str = ""
    reason: str = ""


def snapshot_id(thread_id: str, first_seq: int, last_seq: int) -> str:
    return f"{thread_id}.{first_seq}-{last_seq}"


_ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT}


def _block_text(block: object) -> str:
    if isinstance(block, AgentTextContent):
        return block.text
    if isinstance(block, AgentToolUseContent):
        return f"[{block.tool_name}] {json.dumps(block.input, ensure_ascii=False)}"
    if isinstance(block, AgentToolResultContent):
        payload = block.resolve_payload()
        text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
        return f"[{block.tool_name} {block.status}] {text}"
    if isinstance(block, AgentErrorContent):
        return f"[error] {block.error_message}"
    if isinstance(block, AgentClientContextEntry):
        return ""  # what the user had open is not what was said
    return ""


def _foreign_message(row: TailRow) -> Message:
    """A row written without a RoboZ message (through the thread API, or a fork's copy):
    its blocks as text. Read straight from the stored blocks, because such a row's seed-001
    message needs columns (its timestamp) that a snapshot never reads."""
    texts = [text for text in map(_block_text, decode_blocks(row.content)) if text]
    role = _ROLES.get(row.role, Role.TOOL)
    caller = row.role if role is Role.TOOL else None
    return Message(role=role, caller=caller, content="\n".join(texts))


def _messages(rows: list[TailRow]) -> list[Message]:
    messages: list[Message] = []
    for row in rows:
        if row.extras in (NOTICE, DRAFT):
            # What the store said about the run (e.g. it failed or was interrupted).
            blocks = json.loads(row.content)
            texts = [json.loads(b[1]).get("error_message", "") for b in blocks if b[0] == "error"]
            messages.append(Message(role=Role.TOOL, caller="run", content=" ".join(texts)))
            continue
        if row.extras is None:
            messages.append(_foreign_message(row))
            continue
        stored = StoredRunMessage(row.seq, row.extras, "", row.role, row.status, None, None)
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
            if not run.has_new:
                continue
            try:
                self._snapshot(run, messages)
            except Exception as error:  # a row it cannot read, the store failing for it
                # One thread's trouble never costs the others their snapshot; its coverage
                # is unchanged, so the next sweep tries it again.
                reason = f"{type(error).__name__}: {error}"
                emit(SnapshotFailed(thread_id=run.thread_id, reason=reason))

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
