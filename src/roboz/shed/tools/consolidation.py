"""Memory consolidation: pending snapshots merged into the project's memory document.

The summarizer gets the current memory and the pending snapshots (their sources as ordinary
text) and writes the new document in fixed sections, newer and more authoritative wins. A
reply over ``max_memory_tokens`` or without the sections is asked again with feedback, then
rejected: the snapshots stay pending, nothing is truncated. The document gets a provenance
section (which snapshots, which version it replaces), is written atomically under a name
carrying its digest, and is recorded in the store only if no newer version appeared in the
meantime (a superseded consolidation is discarded). ``memory_startup_tool`` gives a watched
agent's next run the latest memory as a start-up message; a document that no longer matches
its digest is reported and not injected.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from roboz.llm import EndpointLike
from roboz.models import Empty, Message, Role
from roboz.runtime.events import Event, emit
from roboz.shed.sandbox import Sandbox
from roboz.shed.tools.maintenance import (
    Maintenance,
    MaintenanceStep,
    ask_summarizer,
    digest,
    write_atomically,
)
from roboz.threads import LibrarianLedger, MemoryVersion, SnapshotRecord, SQLiteThreadStore
from roboz.tools import Tool

DEFAULT_NAME = "consolidate_memory"
STARTUP_NAME = "load_memory"
MEMORY_KIND = "memory"

SECTIONS = (
    "Standing instructions",
    "User preferences",
    "Active work",
    "Decisions",
    "Open ends",
    "Lessons",
)

CONSOLIDATION_PROMPT = (
    "You maintain the long-term memory document of an AI agent's project. Merge the new "
    "snapshots into the current memory. Use exactly these sections as '## ' headings: "
    + ", ".join(SECTIONS)
    + ". Where facts conflict, the newer and more authoritative one wins (the user's explicit "
    "words over the agent's guesses); drop what is finished or no longer relevant. Source "
    "references are ordinary text: keep them only where they still help. Reply with the "
    "document only, without a title."
)


@dataclass(frozen=True)
class MemoryConsolidated(Event):
    version: int = 0
    snapshot_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConsolidationFailed(Event):
    """No new memory version: the snapshots stay pending (``reason`` says why)."""

    reason: str = ""
    superseded: bool = False


@dataclass(frozen=True)
class MemoryCorrupt(Event):
    """A memory document does not match what was recorded; it is not used."""

    version: int = 0
    reason: str = ""


def memory_path(sandbox: Sandbox, version: MemoryVersion | tuple[int, str]) -> Path:
    number, sha = (
        (version.version, version.digest) if isinstance(version, MemoryVersion) else version
    )
    return sandbox.memory_dir / f"memory-{number:06d}-{sha[:16]}.md"


def snapshot_path(sandbox: Sandbox, snapshot_id: str) -> Path:
    return sandbox.snapshots_dir / f"{snapshot_id}.md"


def latest_memory(store: LibrarianLedger, sandbox: Sandbox) -> tuple[int, str | None]:
    """The latest memory version and its document (None when there is none or it is
    corrupt, which is reported as MemoryCorrupt)."""
    versions = store.list_memory_versions(sandbox.project_dir.name)
    if not versions:
        return 0, None
    latest = versions[-1]
    try:
        text = memory_path(sandbox, latest).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        emit(MemoryCorrupt(version=latest.version, reason=f"{type(error).__name__}: {error}"))
        return latest.version, None
    if digest(text) != latest.digest:
        emit(MemoryCorrupt(version=latest.version, reason="its content changed after writing"))
        return latest.version, None
    return latest.version, text


def _sections_missing(reply: str) -> str | None:
    missing = [name for name in SECTIONS if f"## {name}" not in reply]
    if missing:
        return f"The document lacks the sections {', '.join(missing)}."
    return None


class Consolidation(MaintenanceStep):
    """The consolidation step of one Librarian (build its tool with :meth:`tool`)."""

    instruction = "Merge pending snapshots into the project's memory document."

    def __init__(
        self,
        maintenance: Maintenance,
        endpoint: EndpointLike | None,
        *,
        max_memory_tokens: int = 2000,
        max_batch: int = 20,
        max_attempts: int = 2,
        timeout_s: float = 120.0,
        name: str = DEFAULT_NAME,
    ) -> None:
        if max_memory_tokens < 1 or max_batch < 1 or max_attempts < 1:
            raise ValueError("memory budget, batch and attempts must be positive")
        self.endpoint = endpoint
        self.max_memory_tokens = max_memory_tokens
        self.max_batch = max_batch
        self.max_attempts = max_attempts
        self.timeout_s = timeout_s
        super().__init__(maintenance, name)

    def sweep(self, messages: list[Message]) -> None:
        sandbox, store = self.maintenance.sandbox, self.maintenance.store
        pending = store.list_snapshots(self.maintenance.project, pending=True)[: self.max_batch]
        taken: list[tuple[SnapshotRecord, str]] = []
        for record in pending:
            try:
                text = snapshot_path(sandbox, record.snapshot_id).read_text("utf-8")
            except (OSError, UnicodeDecodeError) as error:
                emit(ConsolidationFailed(reason=f"snapshot {record.snapshot_id}: {error}"))
                continue
            taken.append((record, text))
        if not taken:
            return
        base, current = latest_memory(store, sandbox)
        parts = [f"Current memory (version {base}):\n{current or '(none yet)'}", "New snapshots:"]
        parts += [f"[snapshot {record.snapshot_id}]\n{text}" for record, text in taken]
        try:
            reply = ask_summarizer(
                self.endpoint,
                CONSOLIDATION_PROMPT,
                "\n\n".join(parts),
                budget=self.max_memory_tokens,
                check=_sections_missing,
                attempts=self.max_attempts,
                timeout_s=self.timeout_s,
                record=messages,
                caller=self.name,
            )
        except Exception as error:  # rejected, timed out or failed: the snapshots stay pending
            emit(ConsolidationFailed(reason=f"{type(error).__name__}: {error}"))
            return
        ids = tuple(record.snapshot_id for record, _ in taken)
        provenance = "\n".join(
            f"- {r.snapshot_id}: thread {r.thread_id}, messages {r.first_seq}-{r.last_seq}"
            for r, _ in taken
        )
        document = (
            f"# Memory of project {self.maintenance.project}\n\n{reply}\n\n## Provenance\n\n"
            f"Replaces version {base}; merged snapshots:\n{provenance}\n"
        )
        sha = digest(document)
        path = memory_path(sandbox, (base + 1, sha))
        write_atomically(path, document)
        version = store.record_memory_version(self.maintenance.project, base, sha, ids)
        if version is None:
            path.unlink(missing_ok=True)
            emit(ConsolidationFailed(reason="a newer memory version appeared", superseded=True))
            return
        emit(MemoryConsolidated(version=version, snapshot_ids=ids))


class MemoryStartup:
    """A default tool for a watched agent: once per run, before its first LLM call, the
    latest memory document joins the conversation as a start-up message."""

    def __init__(
        self, sandbox: Sandbox, *, name: str = STARTUP_NAME, store: LibrarianLedger | None = None
    ) -> None:
        self.sandbox = sandbox
        self.name = name
        self._seen: int | None = None
        self._store = store
        """The store keeping the ledger; None: the sandbox's SQLite run store, once it exists."""

    def tool(self) -> Tool:
        return Tool(
            name=self.name,
            instruction="Give the run the project's latest memory.",
            input_type=Empty,
            output_types=(Empty,),
            func=self._run,
            records_own_output=True,
        )

    def _run(self, input: Empty, messages: list[Message]) -> Empty:
        if self._seen == id(messages):
            return Empty()
        self._seen = id(messages)
        if self._store is None:
            if not self.sandbox.run_store.exists():
                return Empty()
            self._store = SQLiteThreadStore(self.sandbox.run_store)
        version, document = latest_memory(self._store, self.sandbox)
        if document is None:
            return Empty()
        header = f"[Project memory, version {version}]"
        if any(m.message_kind == MEMORY_KIND and m.content.startswith(header) for m in messages):
            return Empty()  # a continued thread already has it
        messages.append(
            Message(
                role=Role.USER,
                content=f"{header}\n{document}",
                caller=self.name,
                message_kind=MEMORY_KIND,
            )
        )
        return Empty()


def memory_startup_tool(sandbox: Sandbox) -> Tool:
    return MemoryStartup(sandbox).tool()
