"""The store a served run writes through: the real store, telling the hub after each write.

A run is handed this in place of its agent's store (``Agent.new_run(..., store=...)``), so
every row it commits (its messages, the reply streaming in, its status) wakes the streams of
that thread at once, without them polling the database. Reads pass straight through.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_BY_THREAD_ID = (
    "append_message",
    "update_message",
    "append_blocks",
    "regenerate_turn",
    "set_status",
    "set_title",
    "set_tasks",
    "set_goals",
    "set_run_context",
    "open_run",
)
_BY_LEASE = ("append_run_message", "open_draft", "finish_draft", "close_run")


def _notifying(name: str, by_lease: bool) -> Callable[..., Any]:
    def method(self: NotifyingStore, first: Any, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self.inner, name)(first, *args, **kwargs)
        self.changed(first.thread_id if by_lease else first)
        return result

    method.__name__ = name
    return method


class NotifyingStore:
    """``inner`` with ``changed(thread_id)`` called after each write to a thread."""

    def __init__(self, inner: Any, changed: Callable[[str], None]) -> None:
        self.inner = inner
        self.changed = changed

    @property
    def read_only(self) -> bool:
        return bool(self.inner.read_only)

    @property
    def path(self) -> Any:
        return getattr(self.inner, "path", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"NotifyingStore({self.inner!r})"


for _name in _BY_THREAD_ID:
    setattr(NotifyingStore, _name, _notifying(_name, by_lease=False))
for _name in _BY_LEASE:
    setattr(NotifyingStore, _name, _notifying(_name, by_lease=True))

__all__ = ["NotifyingStore"]
