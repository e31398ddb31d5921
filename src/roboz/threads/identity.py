"""Who is asking: the caller identity every read and write of the thread API is checked
against, and the visibility rules themselves.

The rules, in one place (the store's :meth:`~roboz.threads.access.CallerThreads` and the HTTP
server both apply these functions, so they hold in-process as over the API):

- A thread of another organization does not exist for the caller: reads, writes and searches
  answer as for a missing thread, so its id tells nothing.
- A PRIVATE thread is readable by its creator and by an admin of its organization; an ORG
  thread by every member of the organization. Anyone else gets "not found" too.
- Changing a thread (a new turn, client tool results, cancelling its turn, renaming,
  deleting) is for its creator and an admin of its organization; another reader is refused
  (a permission error, since the thread is visible to them). Forking, pinning and rating
  need only read access: a fork is the reader's own thread, a pin and a rating are theirs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from roboz.threads.record import AgentThreadRecord, ThreadVisibility

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@:+-]{0,127}")
"""What a user or organization id may look like: it appears in URLs, logs and principals."""


def check_name(value: object, what: str) -> str:
    """``value`` if it is a valid user or organization id, else ValueError naming ``what``."""
    if not isinstance(value, str) or _NAME.fullmatch(value) is None:
        raise ValueError(
            f"{what} {value!r} is not valid: use 1-128 letters, digits, '_', '.', '@', ':', "
            "'+' or '-', starting with a letter or digit"
        )
    return value


@dataclass(frozen=True)
class Caller:
    """A person (or program) acting on threads: their user id, their organization and
    whether they administer it."""

    user_id: str
    org_id: str
    admin: bool = False

    def __post_init__(self) -> None:
        check_name(self.user_id, "user id")
        check_name(self.org_id, "organization id")

    @property
    def principal(self) -> str:
        """``"user:ID"``, as ``AgentThreadRecord.created_by_principal`` records it."""
        return f"user:{self.user_id}"


def can_read(caller: Caller, thread: AgentThreadRecord) -> bool:
    """Whether ``caller`` may see ``thread`` at all."""
    if thread.org_id != caller.org_id:
        return False
    if caller.admin or thread.created_by == caller.user_id:
        return True
    return thread.visibility is ThreadVisibility.ORG


def can_change(caller: Caller, thread: AgentThreadRecord) -> bool:
    """Whether ``caller`` may change ``thread`` (new turns, results, cancel, rename, delete)."""
    return thread.org_id == caller.org_id and (caller.admin or thread.created_by == caller.user_id)


__all__ = ["Caller", "can_change", "can_read", "check_name"]
