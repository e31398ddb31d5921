"""Delta fidelity: the thread a client rebuilds from the live stream equals ``GET`` of the
thread, for every kind of turn, also across a connection dropped mid-reply and resumed with
Last-Event-ID, and across a rewound (regenerated) reply."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from roboz.server.client import _events  # pyright: ignore[reportPrivateUsage]
from roboz.threads import AgentThreadDelta, AgentThreadRecord, AgentThreadStatus
from tests.server.conftest import Served


def _read_deltas(
    served: Served, thread_id: str, token: str, count: int | None, *, header: bool = True
) -> list[AgentThreadDelta]:
    """Up to ``count`` delta events from a fresh connection (None: until the turn ends),
    then the connection is dropped."""
    auth = {"Authorization": f"Bearer {served.tokens['bob']}"}
    url = f"{served.url}/v1/ai/threads/{thread_id}/stream"
    if header:
        auth["Last-Event-ID"] = token
    else:
        url += f"?continuation_token={token}"
    deltas: list[AgentThreadDelta] = []
    with httpx.stream("GET", url, headers=auth, timeout=httpx.Timeout(30)) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for name, data in _events(response.iter_lines()):
            assert name == "delta"
            deltas.append(AgentThreadDelta.model_validate_json(data))
            if count is not None and len(deltas) >= count:
                break
            if deltas[-1].status in (
                AgentThreadStatus.USER_TURN,
                AgentThreadStatus.CLIENT_TOOL_TURN,
            ):
                break
    return deltas


def _apply(record: AgentThreadRecord, deltas: list[AgentThreadDelta]) -> AgentThreadRecord:
    for delta in deltas:
        record = record.apply_delta(delta)
    return record


def _same(a: AgentThreadRecord, b: AgentThreadRecord) -> None:
    assert [m.model_dump() for m in a.messages] == [m.model_dump() for m in b.messages]
    assert (a.status, a.title, a.tasks, a.goals) == (b.status, b.title, b.tasks, b.goals)
    assert a.continuation_token == b.continuation_token


@pytest.mark.parametrize("drop_after", [1, 3, 8])
def test_a_connection_dropped_mid_reply_resumes_without_loss_or_duplicates(
    served: Served, drop_after: int
) -> None:
    bob = served.client("bob")
    thread = bob.create_thread(agent="slow")
    held = bob.get_thread(thread.thread_id)
    bob.send_message(thread.thread_id, "tell me a lot 40")
    first = _read_deltas(served, thread.thread_id, held.continuation_token, drop_after)
    assert len(first) == drop_after
    held = _apply(held, first)
    assert held.status is AgentThreadStatus.ROBOTO_TURN  # dropped while the reply streamed
    # Resumed twice, once by header and once by query parameter.
    second = _read_deltas(served, thread.thread_id, held.continuation_token, 2, header=False)
    held = _apply(held, second)
    rest = _read_deltas(served, thread.thread_id, held.continuation_token, None)
    held = _apply(held, rest)
    assert held.status is AgentThreadStatus.USER_TURN
    _same(held, bob.get_thread(thread.thread_id))


def test_many_turns_rebuild_exactly_and_a_rewound_reply_resets_clients(served: Served) -> None:
    bob = served.client("bob")
    thread = bob.create_thread()
    held = bob.get_thread(thread.thread_id)
    resets: list[int] = []
    for text in ("one 3", "two 20", "garble this 5", "four 1"):
        bob.send_message(thread.thread_id, text)
        deltas = _read_deltas(served, thread.thread_id, held.continuation_token, None)
        resets += [
            d.reset_from_message_sequence_num
            for d in deltas
            if d.reset_from_message_sequence_num is not None
        ]
        held = _apply(held, deltas)
        _same(held, bob.get_thread(thread.thread_id))
    assert resets, "the rejected draft of the garbled turn was rewound"


def test_stream_deltas_follows_turns_of_the_async_client_too(served: Served) -> None:
    import asyncio

    from roboz.server import AsyncThreadClient

    async def main() -> tuple[Any, Any]:
        async with AsyncThreadClient(served.url, served.tokens["bob"]) as bob:
            thread = await bob.create_thread(agent="slow")
            await bob.send_message(thread.thread_id, "async please 10")
            grown = [r async for r in bob.stream_deltas(thread.thread_id, record=thread)]
            return grown, await bob.get_thread(thread.thread_id)

    grown, stored = asyncio.run(main())
    assert len(grown) > 3
    lengths = [sum(len(m.content) for m in r.messages) for r in grown]
    assert lengths == sorted(lengths)  # the thread only grows while the reply streams
    _same(grown[-1], stored)


def test_an_idle_stream_is_kept_open_with_comments_and_a_deleted_thread_ends_it(
    served: Served,
) -> None:
    bob = served.client("bob")
    thread = bob.create_thread()
    auth = {"Authorization": f"Bearer {served.tokens['bob']}"}
    url = f"{served.url}/v1/ai/threads/{thread.thread_id}/stream"
    lines: list[str] = []
    with httpx.stream("GET", url, headers=auth, timeout=httpx.Timeout(30)) as response:
        for line in response.iter_lines():
            lines.append(line)
            if line == ": keepalive":  # keepalive_s is 1 in these tests
                bob.delete_thread(thread.thread_id)
            if line.startswith("event: error"):
                break
    assert lines[:2] == ["retry: 1000", ": connected"]
    assert any(line.startswith("event: delta") for line in lines)  # the whole thread first
    assert lines[-1] == "event: error"
