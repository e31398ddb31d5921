"""What every route of one server reaches: the store, the hub, the turns, the agents, and
who the caller is (bearer tokens checked against the store)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from pydantic import BaseModel

from roboz.agent import Agent
from roboz.server.errors import ApiError
from roboz.server.fast import ThreadCache
from roboz.server.hub import ThreadHub
from roboz.server.turns import Turns
from roboz.threads import AccessStore, Caller, CallerThreads

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="roboz"'}


@dataclass
class ServerState:
    store: AccessStore
    hub: ThreadHub
    turns: Turns
    agents: dict[str, Agent]
    keepalive_s: float = 15.0
    remote_cancel: Callable[[str], None] | None = None
    """Passes a cancel to the other servers of a shared store (set by the PostgreSQL feed)."""
    extras: dict[str, Any] = field(default_factory=dict[str, Any])
    thread_cache: ThreadCache = field(default_factory=ThreadCache)
    """Bodies of ``GET`` thread while their thread is unchanged (``fast``)."""

    @property
    def default_agent(self) -> str:
        return next(iter(self.agents))

    def agent_for(self, name: str | None) -> Agent:
        agent = self.agents.get(name or self.default_agent)
        if agent is None:  # a thread made by an agent this server does not serve
            return self.agents[self.default_agent]
        return agent

    def authenticate(self, request: Request) -> Caller:
        header = request.headers.get("authorization")
        if header is None:
            raise ApiError(401, "unauthorized", "send Authorization: Bearer TOKEN", _CHALLENGE)
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(
                401, "unauthorized", "the Authorization header must be Bearer TOKEN", _CHALLENGE
            )
        caller = self.store.verify_api_token(token.strip())
        if caller is None:
            raise ApiError(401, "unauthorized", "the token is unknown or revoked", _CHALLENGE)
        return caller


def server_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.roboz
    return state


def caller_threads(request: Request) -> CallerThreads:
    """The store as the authenticated caller sees it (a FastAPI dependency)."""
    state = server_state(request)
    caller = state.authenticate(request)
    request.state.user = caller.user_id  # for the access log
    return state.store.for_caller(caller)


def json_response(model: BaseModel, status: int = 200) -> Response:
    """``model`` as JSON, serialized by pydantic once (no re-validation on the way out)."""
    return Response(model.model_dump_json(), status_code=status, media_type="application/json")
