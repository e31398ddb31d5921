"""allow / deny / ask per MCP tool name, decided before anything reaches the server.

Rules map name patterns (``fnmatch`` style: ``delete_*``, ``*``) to a verdict. The most
specific pattern wins (an exact name beats any glob; among globs the longest); tools no rule
names are allowed, unless a ``"*"`` rule says otherwise. "ask" puts the call to the user
through the run's UserIO, like the guarded file tools' approvals.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from roboz.runtime.events import Event, emit
from roboz.runtime.io import ask_yes_no

Verdict = Literal["allow", "deny", "ask"]
Rules = Mapping[str, str]
_VERDICTS = ("allow", "deny", "ask")


@dataclass(frozen=True)
class MCPCallDecided(Event):
    """The permission decision on one MCP tool call (tracing reads ``verdict``/``reason``)."""

    server: str = ""
    tool: str = ""
    verdict: str = ""
    reason: str = ""


def check_rules(rules: Rules | None) -> dict[str, Verdict]:
    checked: dict[str, Verdict] = {}
    for pattern, verdict in (rules or {}).items():
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"MCP tool rule patterns must be non-empty strings, got {pattern!r}")
        value = str(verdict)
        if value not in _VERDICTS:
            raise ValueError(
                f"MCP tool rule {pattern!r}: verdict must be allow, deny or ask, got {verdict!r}"
            )
        checked[pattern] = value  # type: ignore[assignment]
    return checked


def verdict_for(rules: Mapping[str, Verdict], tool: str) -> tuple[Verdict, str]:
    """The verdict for ``tool`` and the pattern that gave it ('' for the default)."""
    if tool in rules:
        return rules[tool], tool
    matching = [p for p in rules if fnmatch.fnmatchcase(tool, p)]
    if not matching:
        return "allow", ""
    best = max(matching, key=lambda p: (len(p.replace("*", "")), len(p)))
    return rules[best], best


def authorize(
    rules: Mapping[str, Verdict], server: str, tool: str, arguments: dict[str, Any]
) -> str | None:
    """None if the call may go ahead, else why it may not (safe to show the LLM)."""
    verdict, pattern = verdict_for(rules, tool)
    rule = f"rule {pattern!r}" if pattern else "the default"
    if verdict == "allow":
        return None
    if verdict == "deny":
        reason = f"denied by {rule}"
        emit(MCPCallDecided(server=server, tool=tool, verdict="deny", reason=reason))
        return reason
    shown = json.dumps(arguments, ensure_ascii=False, default=str)
    if len(shown) > 300:
        shown = shown[:299] + "…"
    if ask_yes_no(f"MCP server {server!r} tool {tool!r} wants to run with {shown}. Allow?"):
        emit(MCPCallDecided(server=server, tool=tool, verdict="allow", reason="user approved"))
        return None
    emit(MCPCallDecided(server=server, tool=tool, verdict="deny", reason="user refused"))
    return "the user did not approve the call"
