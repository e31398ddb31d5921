"""What the Librarian's steps share: the watched project, its store, wake-ups, summarizer calls.

One :class:`Maintenance` belongs to one Librarian. Its steps (snapshots, consolidation,
retention) register themselves here, so the cadence can run one more sweep inline when a
watched run ends. Every summarizer call is bounded (a timeout, a length budget asked again
with feedback a bounded number of times) and recorded in the Librarian's own conversation,
never in a watched agent's.

A watched run that ends gets its final sweep from the listener, in the ending run's thread,
however the Librarian's own thread is scheduled: on a loaded machine a short watched run can
end before the Librarian's first step, and the Librarian is then stopped without one. Such a
sweep, made while no Librarian run is in progress, records its summary prompts as a Librarian
run of its own in the store.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from roboz.agent.context import current_run
from roboz.agent.rows import thread_row
from roboz.llm import EndpointLike
from roboz.models import Empty, Message, Role
from roboz.runtime.events import AgentFailed, AgentFinished, AgentStarted, Event, EventPipe
from roboz.shed.sandbox import Sandbox
from roboz.shed.tools._bounded import call_bounded
from roboz.threads import LibrarianLedger, RunInfo, RunRow, SQLiteThreadStore
from roboz.threads.record import new_thread_id
from roboz.tools import Tool

Step = Callable[[list[Message]], None]


def estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so a reader (or a crash) sees the old file or the new one,
    never half of it: a synced temporary file in the same directory, renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class SummaryRejected(Exception):
    """The summarizer's reply could not be used (after the asked-again attempts)."""

    reason: str

    def __str__(self) -> str:
        return self.reason


@dataclass
class Maintenance:
    """The state one Librarian's steps share (set as its ``maintenance`` attribute)."""

    sandbox: Sandbox
    watched: tuple[str, ...]
    own: str | None = None
    """The Librarian's own agent name: retention also prunes its ended runs, its run's start
    and end reset ``record``, and a sweep outside its runs is recorded as one of them."""
    steps: dict[str, Step] = field(default_factory=dict[str, Step])
    """The sweep's steps by tool name, in order (a rebuilt step replaces its old self)."""
    wake: threading.Event = field(default_factory=threading.Event)
    ended: set[str] = field(default_factory=set[str])
    """Watched agents whose run in this process ended (heard on the pipe) while its lease is
    still being released."""
    began_inactive: bool = False
    """Whether the sweep in progress (or the last one) began with no watched run active."""
    record: list[Message] | None = None
    """The conversation of the Librarian's run in progress (where summary prompts go); None
    before that run's first step and once it ended."""
    sweeping: threading.RLock = field(default_factory=threading.RLock)
    """Held by each step, so a sweep run from the listener never interleaves with one."""
    ledger: LibrarianLedger | None = None
    """The store of the watched runs and the ledger (any backend's); None: the sandbox's
    SQLite run store, opened on first use."""
    _listening: set[int] = field(default_factory=set[int])
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def project(self) -> str:
        return self.sandbox.project_dir.name  # raises when the sandbox has no project

    @property
    def store(self) -> LibrarianLedger:
        with self._lock:
            if self.ledger is None:
                self.sandbox.prepare()
                self.ledger = SQLiteThreadStore(self.sandbox.run_store)
            return self.ledger

    def listen(self, pipe: EventPipe) -> None:
        """Hear watched runs start and end on ``pipe`` (once per pipe)."""
        with self._lock:
            if id(pipe) in self._listening:
                return
            self._listening.add(id(pipe))
        pipe.subscribe(self._on_event)

    def _on_event(self, event: Event) -> None:
        if event.agent is not None and event.agent == self.own:
            if isinstance(event, AgentStarted | AgentFinished | AgentFailed):
                with self.sweeping:
                    # A new run's conversation arrives with its first step; an ended run's
                    # list is written no more, so a later sweep's prompts must not go there.
                    self.record = None
            return
        if event.agent not in self.watched:
            return
        if isinstance(event, AgentStarted):
            self.ended.discard(event.agent)
        elif isinstance(event, AgentFinished | AgentFailed):
            self.ended.add(event.agent)
            self.wake.set()
            # The final sweep runs here, in the ending run's thread, before the run goes on
            # to stop its background agents: a background Librarian is cancelled next and
            # might get no further step of its own, or (its thread started late) no step at
            # all.
            with self.sweeping:
                if self.record is not None:
                    self.sweep(self.record)
                else:
                    self._sweep_outside_a_run()

    def _sweep_outside_a_run(self) -> None:
        """A sweep while no Librarian run is in progress: its summary prompts are recorded
        as a Librarian run of their own (nowhere, for a Maintenance without ``own``)."""
        record: list[Message] = []
        self.sweep(record)
        if not record or self.own is None:
            return
        rows: list[RunRow] = []
        previous: tuple[int, Message] | None = None
        for seq, message in enumerate(record):
            rows.append(thread_row(message, seq, previous, 0))
            previous = (seq, message)
        lease, _, _ = self.store.open_run(
            new_thread_id(),
            org_id="local",
            created_by=self.own,
            created_from_agent_id=self.own,
            initial=rows,
        )
        self.store.close_run(lease)

    def is_running(self, run: RunInfo) -> bool:
        """Whether a run still holds ``run`` (a watched run that ended in this process counts
        as ended although it has not released its lease yet)."""
        if not run.active:
            return False
        return not (run.lease_pid == os.getpid() and run.agent in self.ended)

    def runs(self) -> list[RunInfo]:
        return self.store.list_runs(self.watched)

    def sweep(self, messages: list[Message]) -> None:
        for step in list(self.steps.values()):
            step(messages)

    def run_step(self, step: Step, messages: list[Message]) -> None:
        """Run one step of the Librarian's run on its conversation ``messages``."""
        with self.sweeping:
            self.record = messages
            step(messages)


def ask_summarizer(
    endpoint: EndpointLike | None,
    system: str,
    prompt: str,
    *,
    budget: int,
    check: Callable[[str], str | None],
    attempts: int,
    timeout_s: float,
    record: list[Message],
    caller: str,
) -> str:
    """The summarizer's reply to ``prompt``, asked again (with feedback) while it is empty,
    over ``budget`` tokens or refused by ``check`` (which returns the problem), then
    rejected: never truncated. Each request and reply is appended to ``record``."""
    if endpoint is None:
        raise SummaryRejected("no summarizer endpoint")
    request = [Message(role=Role.SYSTEM, content=system), Message(role=Role.USER, content=prompt)]
    record.append(Message(role=Role.TOOL, content=prompt, caller=caller, message_kind="request"))
    problem = ""
    for _ in range(attempts):
        text = call_bounded(
            endpoint, request, timeout_s, thread_name="roboz-librarian-summary"
        ).strip()
        record.append(Message(role=Role.TOOL, content=text, caller=caller, message_kind="reply"))
        size = estimate_tokens(text)
        if not text:
            problem = "The reply is empty."
        elif size > budget:
            problem = f"That is about {size} tokens; it must fit in {budget} tokens."
        else:
            problem = check(text) or ""
            if not problem:
                return text
        feedback = f"{problem} Write it again."
        request += [
            Message(role=Role.ASSISTANT, content=text),
            Message(role=Role.USER, content=feedback),
        ]
        record.append(
            Message(role=Role.TOOL, content=feedback, caller=caller, message_kind="request")
        )
    raise SummaryRejected(f"rejected after {attempts} attempt(s): {problem}")


class MaintenanceStep:
    """One of a Librarian's steps: registered with its Maintenance when built, and run as a
    tool that takes nothing and records its own output (build it with :meth:`tool`)."""

    instruction: ClassVar[str]

    def __init__(self, maintenance: Maintenance, name: str) -> None:
        self.maintenance = maintenance
        self.name = name
        maintenance.steps[name] = self.sweep

    def tool(self) -> Tool:
        return Tool(
            name=self.name,
            instruction=self.instruction,
            input_type=Empty,
            output_types=(Empty,),
            func=self._step,
            records_own_output=True,
        )

    def _step(self, input: Empty, messages: list[Message]) -> Empty:
        self.maintenance.run_step(self.sweep, messages)
        return Empty()

    def sweep(self, messages: list[Message]) -> None:
        raise NotImplementedError


def cancelled() -> bool:
    """Whether the run of the current tool was asked to cancel."""
    run = current_run()
    return run is not None and run.cancel.is_set()
