"""The conversation of a durable turn and its writes to the thread.

Every message a turn adds gets its thread sequence number when it is appended: the turn's
first sequence number (recorded by the turn's first step) plus its position in the turn. A
replayed turn appends the same messages in the same order, so they get the same numbers.
Messages are written in batches by :meth:`DurableTranscript.flush`.

Which DBOS construct gives exactly-once thread writes (checked against DBOS 3.4's code and by
``tests/durable/test_runs.py``):

- A plain step (``DBOS.step`` / ``DBOS.run_step``) is at least once: DBOS saves its result in
  its own transaction after the function returned, so a worker dying in between runs the
  function again on resume. Writes made there would be exactly once only by being
  idempotent.
- A datasource transaction (``SQLAlchemyDatasource.run_tx_step``) is exactly once: the
  function's statements and the step's record (``dbos.datasource_outputs``) commit in one
  PostgreSQL transaction, the record is looked up before the function runs, and a second
  execution's record insert conflicts with the first one's and rolls its transaction back.

So each batch is a datasource transaction on the thread store's own database (the rows are
written through the transaction's psycopg connection), and it is idempotent as well: a row
goes to its fixed sequence number only when that number is free, and a number held by another
message is an error (``roboz.threads.turn_rows``). A worker killed inside a write leaves
nothing of it; the resumed turn writes the batch once; a replay of a recorded batch writes
nothing, since DBOS returns the recorded result.

The batch a tool step writes as it begins (the turn's progress) is the exception: it is part
of that step, a transaction of its own but not a recorded step (``roboz.durable.step_writes``),
and it is the idempotence that makes it exactly once: a step that runs again writes the same
rows again, which finds them there. A replayed step writes nothing; its rows, already in the
thread, go again with the next write, which finds them there too.

A message whose truncation depends on how often it was shown (``times_shown``) is watched, as
in a persisted run: a write also refreshes the stored extras of watched messages that changed,
so the next turn truncates them as this one left them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from roboz.agent.rows import extras_of, thread_row, unsettled
from roboz.agent.transcript import AppendOnlyList, take_new
from roboz.models import Message
from roboz.runtime.events import LLMDelta, LLMProseDelta, LLMRequested
from roboz.threads.record import AgentThreadStatus

Row = tuple[int, str, str, str]
"""A message as written: (seq, role, encoded blocks, RoboZ extras)."""
Updated = tuple[int, str]
"""New extras of a message written earlier: (seq, RoboZ extras)."""
Write = Callable[[list[Row], list[Updated], AgentThreadStatus | None], None]


class DurableTranscript:
    """A turn's transcript: the thread as it was when the turn began, then the turn's
    messages, each numbered on ``append`` and written by ``flush`` (a reply streaming in is
    not kept: a replayed LLM step would not stream it again)."""

    streams = False

    def __init__(
        self,
        messages: Iterable[Message],
        seqs: Sequence[int],
        write: Write,
        thread_id: str | None = None,
    ) -> None:
        self.messages: list[Message] = AppendOnlyList(messages)
        self.thread_id = thread_id
        self._seqs = list(seqs)
        self._written = len(self.messages)
        self._next_seq = (self._seqs[-1] + 1) if self._seqs else 0
        self._runtime_ms: dict[int, int] = {}
        self._write = write  # one recorded transaction
        self._watched = {i: extras_of(m) for i, m in enumerate(self.messages) if unsettled(m)}

    @property
    def last_seq(self) -> int | None:
        return self._seqs[-1] if self._seqs else None

    def seq(self, index: int) -> int:
        return self._seqs[index]

    def append(self, message: Message, runtime_s: float = 0.0) -> None:
        # ``runtime_s`` as the loop measured it is left out: a replay measures another, and
        # a row must be the same however often its turn ran. A tool step's runtime is the
        # recorded one (``note_runtime``).
        self.messages.append(message)
        self._number()

    def adopt(self) -> None:
        recorded = len(self._seqs)
        last = self.messages[recorded - 1] if recorded else None
        for _ in take_new(self.messages, recorded, last):
            self._number()

    def on_reply(self, event: LLMRequested | LLMDelta | LLMProseDelta) -> None:
        return None

    def _number(self) -> None:
        self._seqs.append(self._next_seq)
        self._next_seq += 1

    def note_runtime(self, runtime_ms: int) -> None:
        """The tool step that just ran took ``runtime_ms`` (as recorded); its result is the
        next message."""
        self._runtime_ms[len(self.messages)] = runtime_ms

    def pending_rows(self) -> list[Row]:
        rows: list[Row] = []
        messages = self.messages
        for index in range(self._written, len(messages)):
            previous = (self._seqs[index - 1], messages[index - 1]) if index else None
            seq = self._seqs[index]
            row = thread_row(messages[index], seq, previous, self._runtime_ms.pop(index, 0))
            rows.append((seq, row.role.value, row.content, row.extras))
            if unsettled(messages[index]):
                self._watched[index] = row.extras
        return rows

    def changed_extras(self) -> list[Updated]:
        """Watched messages, written earlier, that were shown since (their new extras)."""
        changed: list[Updated] = []
        for index, written in list(self._watched.items()):
            if index >= self._written:
                continue
            message = self.messages[index]
            extras = extras_of(message)
            if extras != written:
                changed.append((self._seqs[index], extras))
                self._watched[index] = extras
            if not unsettled(message):
                del self._watched[index]
        return changed

    def flush(self, status: AgentThreadStatus | None = None) -> None:
        """Write the messages not written yet, refresh the extras of watched ones, and set
        the thread's status at the turn's end."""
        updated = self.changed_extras()
        rows = self.pending_rows()
        if not rows and not updated and status is None:
            return
        self._write(rows, updated, status)
        self._written = len(self.messages)
