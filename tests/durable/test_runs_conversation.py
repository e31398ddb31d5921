"""A durable turn's transcript numbers its messages on append and writes them in batches
(no database here: the write is a recorder)."""

from __future__ import annotations

import json

import pytest

from roboz.durable.conversation import DurableTranscript, Row, Updated
from roboz.models import Message, Role
from roboz.models.truncation import Truncation
from roboz.threads.record import AgentThreadStatus

Batch = tuple[list[Row], list[Updated], AgentThreadStatus | None]


def conversation(history: list[Message], seqs: list[int]) -> tuple[DurableTranscript, list[Batch]]:
    batches: list[Batch] = []
    return DurableTranscript(
        history, seqs, lambda rows, updated, status: batches.append((rows, updated, status))
    ), batches


def test_messages_are_numbered_on_append_and_written_once_in_batches() -> None:
    turn, batches = conversation([Message(role=Role.USER, content="hi")], [4])
    turn.append(Message(role=Role.ASSISTANT, content='{"action": "look"}', message_kind="action"))
    turn.append(Message(role=Role.TOOL, content="{}", caller="look", message_kind="tool_result"))
    assert [turn.seq(i) for i in range(3)] == [4, 5, 6] and turn.last_seq == 6
    turn.flush()
    turn.flush()  # nothing new: no write
    turn.flush(AgentThreadStatus.USER_TURN)
    assert [[r[0] for r in rows] for rows, _, _ in batches] == [[5, 6], []]
    assert batches[-1][2] is AgentThreadStatus.USER_TURN
    # The tool result answers the action before it, by the action's sequence number.
    blocks = json.loads(batches[0][0][1][2])
    assert json.loads(blocks[0][1])["tool_use_id"] == "tu_5"
    with pytest.raises(TypeError, match="only grows"):
        turn.messages.insert(0, Message(role=Role.USER, content="x"))


def test_what_a_tool_appended_itself_is_numbered_when_adopted_and_written() -> None:
    turn, batches = conversation([Message(role=Role.USER, content="hi")], [0])
    turn.messages.append(Message(role=Role.USER, content="memory", message_kind="memory"))
    assert turn.last_seq == 0  # not numbered until the loop hands it over
    turn.adopt()
    turn.append(Message(role=Role.TOOL, content="{}", caller="look", message_kind="tool_result"))
    turn.flush()
    ((rows, _, _),) = batches
    assert [row[0] for row in rows] == [1, 2]
    assert json.loads(rows[0][3])["content"] == "memory"


def test_a_watched_message_shown_again_has_its_extras_refreshed() -> None:
    watched = Message(role=Role.TOOL, content="long", truncation=Truncation(threshold=2))
    turn, batches = conversation([watched], [0])
    watched.times_shown = 1  # shown once more while the turn ran
    turn.append(Message(role=Role.ASSISTANT, content="x"))
    turn.flush()
    ((rows, updated, _),) = batches
    assert [seq for seq, _ in updated] == [0]
    assert json.loads(updated[0][1])["times_shown"] == 1
    watched.times_shown = 2  # settled: truncated from now on, refreshed one last time
    turn.flush()
    watched.times_shown = 3
    turn.flush()
    assert [[seq for seq, _ in b[1]] for b in batches] == [[0], [0]]
