"""Every agent test runs twice: through ``invoke`` and through ``ainvoke``.

For the ``ainvoke`` pass, ``Agent.invoke`` is replaced by a wrapper that awaits ``ainvoke``
on a fresh event loop, so the same assertions check both drivers of the one scheduler and
the two cannot drift apart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from roboz.agent import Agent
from roboz.models import Message, Stop

_sync_invoke = Agent.invoke


def _through_ainvoke(
    self: Agent, messages: list[Message] | None = None
) -> tuple[Stop, list[Message]]:
    return asyncio.run(self.ainvoke(messages))


@pytest.fixture(autouse=True, params=["invoke", "ainvoke"])
def driver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "ainvoke":
        monkeypatch.setattr(Agent, "invoke", _through_ainvoke)
    yield request.param
