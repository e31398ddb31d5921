"""``DurableRuns``: the agents a worker process serves, and its DBOS launch."""

from __future__ import annotations

from collections.abc import Sequence

from roboz.agent import Agent


class DurableRuns:
    """The agents whose turns run durably on ``queue``; ``launch`` makes this process a worker."""

    def __init__(
        self,
        url: str,
        *,
        agents: Sequence[Agent],
        queue: str = "roboz",
        application_version: str | None = None,
        worker_concurrency: int | None = None,
        concurrency: int | None = None,
    ) -> None:
        self.url = url
        self.agents = {agent.name: agent for agent in agents}
        self.queue = queue
        self.application_version = application_version or "roboz-0"
        self.worker_concurrency = worker_concurrency
        self.concurrency = concurrency

    def launch(self, *, executor_id: str) -> None:
        raise NotImplementedError

    def shutdown(self) -> None:
        raise NotImplementedError
