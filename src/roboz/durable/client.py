"""``DurableClient``: enqueue turns without being a worker (DBOSClient underneath)."""

from __future__ import annotations

from typing import Any


class RunHandle:
    """One durable turn: its workflow id, its status, its result."""

    def __init__(self, workflow_id: str) -> None:
        self.workflow_id = workflow_id

    def result(self, timeout: float | None = None) -> Any:
        raise NotImplementedError

    def status(self) -> str:
        raise NotImplementedError


class DurableClient:
    """Enqueues turns on a queue that workers (``DurableRuns.launch``) serve."""

    def __init__(self, url: str, *, queue: str = "roboz") -> None:
        self.url = url
        self.queue = queue

    def enqueue(self, agent: str, input: str, *, thread_id: str) -> RunHandle:
        raise NotImplementedError

    def close(self) -> None:
        return None
