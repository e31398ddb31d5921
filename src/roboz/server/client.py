"""A typed Python client of the thread API (httpx): :class:`ThreadClient` and
:class:`AsyncThreadClient`, the same operations, returning the thread model's own types.

``stream_deltas`` follows a thread live: it applies each delta of the server's event stream
to the record it holds (``AgentThreadRecord.apply_delta``) and yields the record as it grows;
a dropped connection is resumed from the last delta's token (``Last-Event-ID``), so nothing
is missed or applied twice. Every error the server answers is raised as
:class:`ThreadApiError` with its status, code and message.

Needs ``roboz[server]`` (httpx) only on the client side; it imports no server code.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from roboz.threads import (
    AgentGoal,
    AgentMessageStatus,
    AgentThreadDelta,
    AgentThreadRecord,
    AgentThreadStatus,
    AnalysisScope,
    Caller,
    ClientToolSpec,
    ClientViewingContext,
    ThreadPage,
    ThreadRating,
    ThreadVisibility,
)

T = TypeVar("T")

RESTING = (
    AgentThreadStatus.NOT_STARTED,
    AgentThreadStatus.USER_TURN,
    AgentThreadStatus.CLIENT_TOOL_TURN,
    AgentThreadStatus.GOALS_FAILED,
)


class ThreadApiError(Exception):
    """The server refused a request: HTTP ``status``, the error ``code`` it named (e.g.
    ``thread_not_found``, ``thread_read_only``) and its one-line ``message``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True)
class TurnStarted:
    """A turn the server accepted: follow it from ``continuation_token``."""

    thread_id: str
    status: AgentThreadStatus
    continuation_token: str
    durable_turn: str | None = None
    """The turn's workflow id when a ``roboz worker`` runs it (``roboz serve --durable``)."""


def is_idle(record: AgentThreadRecord) -> bool:
    """True when nothing is running on the thread: the user (or the client's tools) has
    the turn and no message is still being generated."""
    return record.status in RESTING and not any(
        m.status is AgentMessageStatus.GENERATING for m in record.messages
    )


@dataclass(frozen=True)
class _Call:
    method: str
    path: str
    parse: Callable[[httpx.Response], Any]
    body: Any = None
    params: dict[str, Any] | None = None


def _error(response: httpx.Response) -> ThreadApiError:
    try:
        detail = response.json()["error"]
        return ThreadApiError(response.status_code, str(detail["code"]), str(detail["message"]))
    except (ValueError, KeyError, TypeError):
        text = response.text.strip().splitlines()[0] if response.text.strip() else ""
        return ThreadApiError(response.status_code, "http_error", text or response.reason_phrase)


def _model(kind: type[BaseModel]) -> Callable[[httpx.Response], Any]:
    return lambda response: kind.model_validate_json(response.content)


def _page(response: httpx.Response) -> ThreadPage:
    data = response.json()
    threads = [AgentThreadRecord.model_validate(t) for t in data["threads"]]
    return ThreadPage(threads, data.get("next_page_token"))


def _turn(response: httpx.Response) -> TurnStarted:
    data = response.json()
    return TurnStarted(
        data["thread_id"],
        AgentThreadStatus(data["status"]),
        data["continuation_token"],
        data.get("durable_turn"),
    )


def _dump(value: BaseModel | Mapping[str, Any]) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else dict(value)


class _Calls:
    """Each operation once, as the request it makes and how its answer is read."""

    @staticmethod
    def create_thread(title: str | None, visibility: ThreadVisibility, agent: str | None) -> _Call:
        body = {"title": title, "visibility": ThreadVisibility(visibility).value, "agent": agent}
        return _Call("POST", "/v1/ai/threads", _model(AgentThreadRecord), body)

    @staticmethod
    def list_threads(limit: int, page_token: str | None, pinned: bool) -> _Call:
        params: dict[str, Any] = {"limit": limit, "pinned": pinned}
        if page_token is not None:
            params["page_token"] = page_token
        return _Call("GET", "/v1/ai/threads", _page, params=params)

    @staticmethod
    def search_threads(query: str, limit: int, page_token: str | None) -> _Call:
        body = {"query": query, "limit": limit, "page_token": page_token}
        return _Call("POST", "/v1/ai/threads/search", _page, body)

    @staticmethod
    def get_thread(thread_id: str) -> _Call:
        return _Call("GET", f"/v1/ai/threads/{thread_id}", _model(AgentThreadRecord))

    @staticmethod
    def delete_thread(thread_id: str) -> _Call:
        return _Call("DELETE", f"/v1/ai/threads/{thread_id}", lambda r: None)

    @staticmethod
    def fork_thread(
        thread_id: str, sequence_num: int, title: str | None, visibility: ThreadVisibility
    ) -> _Call:
        body = {
            "message_sequence_num": sequence_num,
            "title": title,
            "visibility": ThreadVisibility(visibility).value,
        }
        return _Call("POST", f"/v1/ai/threads/{thread_id}/fork", _model(AgentThreadRecord), body)

    @staticmethod
    def set_pinned(thread_id: str, pinned: bool) -> _Call:
        def parse(response: httpx.Response) -> datetime | None:
            value = response.json()["pinned_at"]
            return None if value is None else datetime.fromisoformat(value)

        return _Call("PUT" if pinned else "DELETE", f"/v1/ai/threads/{thread_id}/pin", parse)

    @staticmethod
    def rate_thread(
        thread_id: str, rating: ThreadRating, sequence_num: int | None, comment: str | None
    ) -> _Call:
        body = {
            "rating": ThreadRating(rating).value,
            "message_sequence_num": sequence_num,
            "comment": comment,
        }
        return _Call(
            "POST",
            f"/v1/ai/threads/{thread_id}/rate",
            lambda r: datetime.fromisoformat(r.json()["created"]),
            body,
        )

    @staticmethod
    def send_message(
        thread_id: str,
        text: str,
        client_tools: Sequence[ClientToolSpec | Mapping[str, Any]],
        scope: AnalysisScope | None,
        viewing_context: ClientViewingContext | None,
        goals: Sequence[AgentGoal | Mapping[str, Any]],
    ) -> _Call:
        body: dict[str, Any] = {"text": text}
        if client_tools:
            body["client_tools"] = [_dump(spec) for spec in client_tools]
        if scope is not None:
            body["scope"] = _dump(scope)
        if viewing_context is not None:
            body["viewing_context"] = _dump(viewing_context)
        if goals:
            body["goals"] = [_dump(goal) for goal in goals]
        return _Call("POST", f"/v1/ai/threads/{thread_id}/messages", _turn, body)

    @staticmethod
    def submit_tool_results(thread_id: str, results: Mapping[str, Any]) -> _Call:
        body = {"results": dict(results)}
        return _Call("POST", f"/v1/ai/threads/{thread_id}/tool-results", _turn, body)

    @staticmethod
    def cancel(thread_id: str) -> _Call:
        return _Call(
            "POST", f"/v1/ai/threads/{thread_id}/cancel", lambda r: bool(r.json()["cancelled"])
        )

    @staticmethod
    def whoami() -> _Call:
        def parse(response: httpx.Response) -> Caller:
            data = response.json()
            return Caller(data["user_id"], data["org_id"], admin=bool(data["admin"]))

        return _Call("GET", "/v1/ai/me", parse)

    @staticmethod
    def delta(thread_id: str, continuation_token: str | None) -> _Call:
        params = None if continuation_token is None else {"continuation_token": continuation_token}
        return _Call(
            "GET", f"/v1/ai/threads/{thread_id}/delta", _model(AgentThreadDelta), params=params
        )


class _Events:
    """Server-Sent Events from lines: yields (event, data) once a blank line ends one."""

    def __init__(self) -> None:
        self.name = "message"
        self.data: list[str] = []

    def feed(self, line: str) -> tuple[str, str] | None:
        if not line:
            if not self.data:
                self.name = "message"
                return None
            event = (self.name, "\n".join(self.data))
            self.name, self.data = "message", []
            return event
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self.name = value
        elif field == "data":
            self.data.append(value)
        return None


class _Follower:
    """What ``stream_deltas`` keeps between connections: the record and its token."""

    def __init__(self, record: AgentThreadRecord, max_reconnects: int) -> None:
        self.record = record
        self.max_reconnects = max_reconnects
        self.failures = 0

    @property
    def headers(self) -> dict[str, str]:
        return {"Last-Event-ID": self.record.continuation_token, "Accept": "text/event-stream"}

    def apply(self, name: str, data: str) -> AgentThreadRecord | None:
        if name == "error":
            raise _error(httpx.Response(500, content=data))
        if name != "delta":
            return None
        self.record = self.record.apply_delta(AgentThreadDelta.model_validate_json(data))
        self.failures = 0
        return self.record

    def dropped(self, error: Exception) -> float:
        """How long to wait before reconnecting; raise when it failed too often."""
        self.failures += 1
        if self.failures > self.max_reconnects:
            raise error
        return min(0.05 * 2**self.failures, 2.0)


def _events(lines: Iterable[str]) -> Iterator[tuple[str, str]]:
    parser = _Events()
    for line in lines:
        event = parser.feed(line)
        if event is not None:
            yield event


class ThreadClient:
    """The thread API of ``base_url`` (e.g. ``http://127.0.0.1:8340``), as the caller
    ``token`` names."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ThreadClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _do(self, call: _Call) -> Any:
        response = self._http.request(call.method, call.path, json=call.body, params=call.params)
        if response.is_error:
            raise _error(response)
        return call.parse(response)

    def create_thread(
        self,
        *,
        title: str | None = None,
        visibility: ThreadVisibility = ThreadVisibility.PRIVATE,
        agent: str | None = None,
    ) -> AgentThreadRecord:
        """A new thread of the caller's, answered by ``agent`` (the server's default)."""
        result: AgentThreadRecord = self._do(_Calls.create_thread(title, visibility, agent))
        return result

    def list_threads(
        self, *, limit: int = 50, page_token: str | None = None, pinned: bool = False
    ) -> ThreadPage:
        """Threads the caller may read, newest first, with their ``pinned_at``."""
        result: ThreadPage = self._do(_Calls.list_threads(limit, page_token, pinned))
        return result

    def search_threads(
        self, query: str, *, limit: int = 50, page_token: str | None = None
    ) -> ThreadPage:
        result: ThreadPage = self._do(_Calls.search_threads(query, limit, page_token))
        return result

    def get_thread(self, thread_id: str) -> AgentThreadRecord:
        result: AgentThreadRecord = self._do(_Calls.get_thread(thread_id))
        return result

    def delete_thread(self, thread_id: str) -> None:
        self._do(_Calls.delete_thread(thread_id))

    def fork_thread(
        self,
        thread_id: str,
        message_sequence_num: int,
        *,
        title: str | None = None,
        visibility: ThreadVisibility = ThreadVisibility.PRIVATE,
    ) -> AgentThreadRecord:
        call = _Calls.fork_thread(thread_id, message_sequence_num, title, visibility)
        result: AgentThreadRecord = self._do(call)
        return result

    def set_pinned(self, thread_id: str, pinned: bool) -> datetime | None:
        result: datetime | None = self._do(_Calls.set_pinned(thread_id, pinned))
        return result

    def rate_thread(
        self,
        thread_id: str,
        rating: ThreadRating,
        *,
        message_sequence_num: int | None = None,
        comment: str | None = None,
    ) -> datetime:
        call = _Calls.rate_thread(thread_id, rating, message_sequence_num, comment)
        result: datetime = self._do(call)
        return result

    def send_message(
        self,
        thread_id: str,
        text: str,
        *,
        client_tools: Sequence[ClientToolSpec | Mapping[str, Any]] = (),
        scope: AnalysisScope | None = None,
        viewing_context: ClientViewingContext | None = None,
        goals: Sequence[AgentGoal | Mapping[str, Any]] = (),
    ) -> TurnStarted:
        """Start the agent's turn with the user's ``text`` (returns once it runs)."""
        call = _Calls.send_message(thread_id, text, client_tools, scope, viewing_context, goals)
        result: TurnStarted = self._do(call)
        return result

    def submit_tool_results(self, thread_id: str, results: Mapping[str, Any]) -> TurnStarted:
        """Answer the client tool uses the thread waits for; its turn goes on."""
        result: TurnStarted = self._do(_Calls.submit_tool_results(thread_id, results))
        return result

    def cancel(self, thread_id: str) -> bool:
        """Cancel the running turn (True: stopped by the server asked; False: passed on to
        the server running it)."""
        result: bool = self._do(_Calls.cancel(thread_id))
        return result

    def whoami(self) -> Caller:
        """Who the token acts as: its user, organization and whether an admin."""
        result: Caller = self._do(_Calls.whoami())
        return result

    def delta(self, thread_id: str, continuation_token: str | None = None) -> AgentThreadDelta:
        result: AgentThreadDelta = self._do(_Calls.delta(thread_id, continuation_token))
        return result

    def stream_deltas(
        self,
        thread_id: str,
        *,
        record: AgentThreadRecord | None = None,
        until_idle: bool = True,
        max_reconnects: int = 5,
    ) -> Iterator[AgentThreadRecord]:
        """Yield the thread after each delta of its live stream, starting from ``record``
        (default: the thread as read now). With ``until_idle`` it ends once a delta leaves
        no turn running (at once if the thread, read now, runs none); give the ``record``
        held from before ``send_message`` to follow that turn from its start. A dropped
        connection is resumed where it broke off."""
        if record is None:
            record = self.get_thread(thread_id)
            if until_idle and is_idle(record):
                return
        follow = _Follower(record, max_reconnects)
        path = f"/v1/ai/threads/{thread_id}/stream"
        while True:
            try:
                with self._http.stream(
                    "GET", path, headers=follow.headers, timeout=httpx.Timeout(None, connect=10)
                ) as response:
                    if response.is_error:
                        response.read()
                        raise _error(response)
                    for name, data in _events(response.iter_lines()):
                        grown = follow.apply(name, data)
                        if grown is not None:
                            yield grown
                            if until_idle and is_idle(grown):
                                return
                ended = httpx.RemoteProtocolError("the server ended the stream")
                time.sleep(follow.dropped(ended))
            except httpx.TransportError as error:
                time.sleep(follow.dropped(error))


class AsyncThreadClient:
    """:class:`ThreadClient` for async code (the same operations, awaited)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncThreadClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _do(self, call: _Call) -> Any:
        response = await self._http.request(
            call.method, call.path, json=call.body, params=call.params
        )
        if response.is_error:
            raise _error(response)
        return call.parse(response)

    async def create_thread(
        self,
        *,
        title: str | None = None,
        visibility: ThreadVisibility = ThreadVisibility.PRIVATE,
        agent: str | None = None,
    ) -> AgentThreadRecord:
        result: AgentThreadRecord = await self._do(_Calls.create_thread(title, visibility, agent))
        return result

    async def list_threads(
        self, *, limit: int = 50, page_token: str | None = None, pinned: bool = False
    ) -> ThreadPage:
        result: ThreadPage = await self._do(_Calls.list_threads(limit, page_token, pinned))
        return result

    async def search_threads(
        self, query: str, *, limit: int = 50, page_token: str | None = None
    ) -> ThreadPage:
        result: ThreadPage = await self._do(_Calls.search_threads(query, limit, page_token))
        return result

    async def get_thread(self, thread_id: str) -> AgentThreadRecord:
        result: AgentThreadRecord = await self._do(_Calls.get_thread(thread_id))
        return result

    async def delete_thread(self, thread_id: str) -> None:
        await self._do(_Calls.delete_thread(thread_id))

    async def fork_thread(
        self,
        thread_id: str,
        message_sequence_num: int,
        *,
        title: str | None = None,
        visibility: ThreadVisibility = ThreadVisibility.PRIVATE,
    ) -> AgentThreadRecord:
        call = _Calls.fork_thread(thread_id, message_sequence_num, title, visibility)
        result: AgentThreadRecord = await self._do(call)
        return result

    async def set_pinned(self, thread_id: str, pinned: bool) -> datetime | None:
        result: datetime | None = await self._do(_Calls.set_pinned(thread_id, pinned))
        return result

    async def rate_thread(
        self,
        thread_id: str,
        rating: ThreadRating,
        *,
        message_sequence_num: int | None = None,
        comment: str | None = None,
    ) -> datetime:
        call = _Calls.rate_thread(thread_id, rating, message_sequence_num, comment)
        result: datetime = await self._do(call)
        return result

    async def send_message(
        self,
        thread_id: str,
        text: str,
        *,
        client_tools: Sequence[ClientToolSpec | Mapping[str, Any]] = (),
        scope: AnalysisScope | None = None,
        viewing_context: ClientViewingContext | None = None,
        goals: Sequence[AgentGoal | Mapping[str, Any]] = (),
    ) -> TurnStarted:
        call = _Calls.send_message(thread_id, text, client_tools, scope, viewing_context, goals)
        result: TurnStarted = await self._do(call)
        return result

    async def submit_tool_results(self, thread_id: str, results: Mapping[str, Any]) -> TurnStarted:
        result: TurnStarted = await self._do(_Calls.submit_tool_results(thread_id, results))
        return result

    async def cancel(self, thread_id: str) -> bool:
        result: bool = await self._do(_Calls.cancel(thread_id))
        return result

    async def whoami(self) -> Caller:
        result: Caller = await self._do(_Calls.whoami())
        return result

    async def delta(
        self, thread_id: str, continuation_token: str | None = None
    ) -> AgentThreadDelta:
        result: AgentThreadDelta = await self._do(_Calls.delta(thread_id, continuation_token))
        return result

    async def stream_deltas(
        self,
        thread_id: str,
        *,
        record: AgentThreadRecord | None = None,
        until_idle: bool = True,
        max_reconnects: int = 5,
    ) -> AsyncIterator[AgentThreadRecord]:
        """:meth:`ThreadClient.stream_deltas`, async."""
        if record is None:
            record = await self.get_thread(thread_id)
            if until_idle and is_idle(record):
                return
        follow = _Follower(record, max_reconnects)
        path = f"/v1/ai/threads/{thread_id}/stream"
        while True:
            try:
                async with self._http.stream(
                    "GET", path, headers=follow.headers, timeout=httpx.Timeout(None, connect=10)
                ) as response:
                    if response.is_error:
                        await response.aread()
                        raise _error(response)
                    parser = _Events()
                    async for line in response.aiter_lines():
                        event = parser.feed(line)
                        if event is None:
                            continue
                        grown = follow.apply(*event)
                        if grown is not None:
                            yield grown
                            if until_idle and is_idle(grown):
                                return
                ended = httpx.RemoteProtocolError("the server ended the stream")
                await asyncio.sleep(follow.dropped(ended))
            except httpx.TransportError as error:
                await asyncio.sleep(follow.dropped(error))


__all__ = ["AsyncThreadClient", "ThreadApiError", "ThreadClient", "TurnStarted", "is_idle"]
