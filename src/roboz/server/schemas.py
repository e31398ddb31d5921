"""The bodies the thread API takes and returns, beside the thread model's own (records and
deltas go out as ``roboz.threads`` defines them). Request bodies refuse unknown fields, so a
misspelt field is a 422 naming it, not silently ignored; they give the OpenAPI schema its
shapes too."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from roboz.threads import (
    AgentGoal,
    AgentThreadRecord,
    AgentThreadStatus,
    AnalysisScope,
    ClientToolSpec,
    ClientViewingContext,
    ThreadRating,
    ThreadVisibility,
)

MAX_TEXT = 200_000
"""Characters a user's message or a comment may have."""


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateThreadRequest(_Request):
    """A new, empty thread of the caller's (``origin`` is set by the server, never here)."""

    title: str | None = Field(default=None, max_length=1000)
    visibility: ThreadVisibility = ThreadVisibility.PRIVATE
    agent: str | None = Field(default=None, max_length=200)
    """The served agent that answers the thread's turns (default: the server's first)."""


class ThreadPageResponse(BaseModel):
    """A page of threads (metadata and the caller's ``pinned_at``, no messages)."""

    threads: list[AgentThreadRecord]
    next_page_token: str | None = None


class SearchRequest(_Request):
    query: str = Field(min_length=1, max_length=1000)
    """Text to find in titles and message text (case-insensitive for ASCII letters)."""
    limit: int = Field(default=50, ge=1, le=1000)
    page_token: str | None = Field(default=None, max_length=2000)


class ForkRequest(_Request):
    message_sequence_num: int = Field(ge=0)
    """The last message of the source copied into the fork."""
    title: str | None = Field(default=None, max_length=1000)
    visibility: ThreadVisibility = ThreadVisibility.PRIVATE


class TurnRequest(_Request):
    """A user's message, starting the agent's turn on the thread."""

    text: str = Field(min_length=1, max_length=MAX_TEXT)
    client_tools: list[ClientToolSpec] = Field(default_factory=list[ClientToolSpec], max_length=64)
    """Tools the client runs itself; a call to one ends the turn in CLIENT_TOOL_TURN."""
    scope: AnalysisScope | None = None
    viewing_context: ClientViewingContext | None = None
    goals: list[AgentGoal] = Field(default_factory=list[AgentGoal], max_length=64)


class ToolResultsRequest(_Request):
    """What each pending client tool use returned (text or JSON), by ``tool_use_id``."""

    results: dict[str, Any] = Field(min_length=1, max_length=64)


class TurnAccepted(BaseModel):
    """The turn runs; follow it with the stream or deltas from ``continuation_token``."""

    thread_id: str
    status: AgentThreadStatus
    continuation_token: str
    """A token from before the turn's first write: deltas from it show the whole turn."""
    durable_turn: str | None = None
    """The turn's workflow id when a ``roboz worker`` runs it (``roboz serve --durable``):
    it is queued, and its first write (the user's message) follows as a delta."""


class CancelResponse(BaseModel):
    thread_id: str
    cancelled: bool
    """True when this server stopped the turn; False when the request was passed to the
    server that runs it."""


class RateRequest(_Request):
    rating: ThreadRating
    message_sequence_num: int | None = Field(default=None, ge=0)
    """The message rated; None rates the thread as a whole."""
    comment: str | None = Field(default=None, max_length=10_000)


class RatingResponse(BaseModel):
    thread_id: str
    rating: ThreadRating
    message_sequence_num: int | None
    created: datetime


class PinResponse(BaseModel):
    thread_id: str
    pinned_at: datetime | None


class AgentInfo(BaseModel):
    name: str
    description: str
    mode: str
    goal_types: list[str] = Field(default_factory=list[str])
    """The goal types the agent checks (its ``goal_checks``): what a turn's ``goals`` may
    declare."""


class Identity(BaseModel):
    """Who the caller's token acts as."""

    user_id: str
    org_id: str
    admin: bool
    """An admin of the organization: reads its PRIVATE threads and changes any of them."""


class AgentList(BaseModel):
    agents: list[AgentInfo]
    default: str
