"""MCPServer: one MCP server connection, owned by a private event-loop thread.

The connection opens lazily (on the first listing or call), and one task on the loop owns it
from ``initialize`` to shutdown, because the SDK's sessions and transports must be entered and
left in the same task. Calls from the agent block on that loop with a timeout. A connection
that dies is re-opened on the next call, at most ``max_reconnects`` times over the server's
life; a call in flight when it died is not repeated (tool calls may have effects).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
import weakref
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import IO, TYPE_CHECKING, Any, cast

from mcp import ClientSession, McpError, types

from roboz.mcp.loop import LoopThread
from roboz.mcp.transport import HttpTransport, StdioTransport, Transport

if TYPE_CHECKING:
    from roboz.mcp.permissions import Rules
    from roboz.tools import Tool

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_CONNECT_TIMEOUT_S = 30.0
DEFAULT_MAX_RECONNECTS = 3
# Slack for the loop hop on top of the SDK's own request timeout, which should fire first.
_WAIT_SLACK_S = 5.0
_TEARDOWN_DELAY_S = 0.2


class MCPError(Exception):
    """An MCP server could not be reached or did not answer; the message names the server."""


class MCPConnectionError(MCPError):
    """Connecting failed, the connection died, or reconnects are used up."""


class MCPCallError(MCPError):
    """The server answered a call with a protocol error (unknown tool, bad arguments...)."""


class MCPTimeout(MCPError):
    """No answer within the timeout."""


class MCPServer:
    """A server whose tools become RoboZ tools: ``MCPServer.stdio(...)`` or ``.http(url)``.

    Use it as a context manager, or call ``close()``: that ends the session and the server's
    whole process group. Open servers are also closed at interpreter exit.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        name: str,
        timeout: float = DEFAULT_TIMEOUT_S,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        max_reconnects: int = DEFAULT_MAX_RECONNECTS,
    ) -> None:
        if timeout <= 0 or connect_timeout <= 0:
            raise ValueError("MCPServer timeouts must be positive")
        if max_reconnects < 0:
            raise ValueError("max_reconnects must be >= 0")
        self.name = name
        self.transport = transport
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_reconnects = max_reconnects
        self.reconnects = 0
        self._loop = LoopThread(f"mcp-{name}")
        self._state: _Connection | None = None
        self._connect_lock: asyncio.Lock | None = None
        self._tools: list[types.Tool] | None = None
        self._closed = False
        self._guard = threading.Lock()
        _OPEN.add(self)

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        name: str | None = None,
        stderr: IO[Any] | int | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        max_reconnects: int = DEFAULT_MAX_RECONNECTS,
    ) -> MCPServer:
        """A server run as a child process speaking MCP on stdin/stdout.

        ``env`` is added to this process's environment; ``stderr`` takes the server's log
        (inherited by default; ``subprocess.DEVNULL`` drops it).
        """
        transport = StdioTransport(command, tuple(args), env=env, cwd=cwd, stderr=stderr)
        return cls(
            transport,
            name=name or command.rsplit("/", 1)[-1],
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_reconnects=max_reconnects,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        max_reconnects: int = DEFAULT_MAX_RECONNECTS,
    ) -> MCPServer:
        """A server reached over streamable HTTP at ``url`` (``headers`` e.g. for a token)."""
        transport = HttpTransport(url, headers=headers, timeout=timeout)
        return cls(
            transport,
            name=name or url,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_reconnects=max_reconnects,
        )

    # -- what the agent uses -----------------------------------------------------------------

    def list_tools(self) -> list[types.Tool]:
        """The server's tools (connects if needed; cached per connection)."""
        tools = self._tools
        if tools is None:
            tools = self._tools = self._run(self._list_tools(), self.connect_timeout + self.timeout)
        return list(tools)

    def call_tool(
        self, tool: str, arguments: dict[str, Any], *, timeout: float | None = None
    ) -> types.CallToolResult:
        """Call ``tool``; raises MCPError subclasses for transport and protocol failures (a
        tool that reports its own failure returns a result with ``isError`` set)."""
        limit = timeout or self.timeout
        return self._run(self._call(tool, arguments, limit), self.connect_timeout + limit)

    async def acall_tool(
        self, tool: str, arguments: dict[str, Any], *, timeout: float | None = None
    ) -> types.CallToolResult:
        """``call_tool`` for async callers: awaits on their loop instead of blocking it."""
        limit = timeout or self.timeout
        if self._closed:
            raise MCPConnectionError(f"MCP server {self.name!r} is closing")
        future = self._loop.submit(self._call(tool, arguments, limit))
        try:
            return await asyncio.wait_for(
                asyncio.wrap_future(future), self.connect_timeout + limit + _WAIT_SLACK_S
            )
        except TimeoutError:
            future.cancel()
            raise MCPTimeout(
                f"MCP server {self.name!r} did not answer within {limit:.0f} s"
            ) from None

    def tools(
        self,
        *,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        rules: Rules | None = None,
        prefix: str = "",
    ) -> list[Tool]:
        """This server's tools as RoboZ tools (see ``roboz.mcp.tools.build_tools``)."""
        from roboz.mcp.tools import build_tools

        return build_tools(self, include=include, exclude=exclude, rules=rules, prefix=prefix)

    @property
    def pid(self) -> int | None:
        """The running server's process id (stdio servers that are connected)."""
        return getattr(self.transport, "pid", None)

    def close(self) -> None:
        """End the session and the server's process group; the server can be reopened."""
        with self._guard:
            self._closed = True
        self._loop.stop(self._shutdown(), timeout=15.0)
        self._state = None
        self._tools = None
        self._connect_lock = None
        with self._guard:
            self._closed = False

    def __enter__(self) -> MCPServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MCPServer(name={self.name!r}, transport={self.transport.description!r})"

    # -- on the loop ---------------------------------------------------------------------------

    def _run(self, coro: Any, timeout: float) -> Any:
        if self._closed:
            coro.close()
            raise MCPConnectionError(f"MCP server {self.name!r} is closing")
        try:
            return self._loop.run(coro, timeout + _WAIT_SLACK_S)
        except TimeoutError:
            raise MCPTimeout(
                f"MCP server {self.name!r} did not answer within {timeout:.0f} s"
            ) from None

    async def _session(self) -> ClientSession:
        if self._connect_lock is None:
            self._connect_lock = asyncio.Lock()
        async with self._connect_lock:
            state = self._state
            if state is not None and state.alive:
                return state.session
            if state is not None:  # it was open and died
                await state.close()
                if self.reconnects >= self.max_reconnects:
                    raise MCPConnectionError(
                        f"MCP server {self.name!r} is down and {self.reconnects} reconnect(s) "
                        "were already used"
                    )
                self.reconnects += 1
                self._tools = None
            state = _Connection(self.transport)
            try:
                await asyncio.wait_for(state.open(), self.connect_timeout)
            except BaseException as error:
                await state.close()
                if isinstance(error, asyncio.CancelledError):
                    raise
                detail = "timed out" if isinstance(error, TimeoutError) else _describe(error)
                raise MCPConnectionError(
                    f"cannot connect to MCP server {self.name!r} "
                    f"({self.transport.description}): {detail}"
                ) from None
            self._state = state
            return state.session

    async def _list_tools(self) -> list[types.Tool]:
        session = await self._session()
        found: list[types.Tool] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self._guarded(session.list_tools(params=params), "listing tools")
            found.extend(page.tools)
            cursor = page.nextCursor
            if not cursor:
                return found

    async def _call(self, tool: str, arguments: dict[str, Any], timeout: float) -> Any:
        session = await self._session()
        return await self._guarded(
            session.call_tool(tool, arguments, read_timeout_seconds=timedelta(seconds=timeout)),
            f"calling {tool!r}",
        )

    async def _guarded(self, request: Any, what: str) -> Any:
        state = self._state
        try:
            return await request
        except McpError as error:
            if error.error.code == types.CONNECTION_CLOSED or (state and not state.alive):
                raise MCPConnectionError(
                    f"MCP server {self.name!r} went away while {what}"
                ) from None
            if error.error.code == 408:  # the SDK's request timeout
                raise MCPTimeout(f"MCP server {self.name!r} timed out {what}") from None
            raise MCPCallError(
                f"MCP server {self.name!r} refused {what}: {error.error.message}"
            ) from None
        except (OSError, RuntimeError, ValueError) as error:
            if state is not None and not state.alive:
                raise MCPConnectionError(
                    f"MCP server {self.name!r} went away while {what}"
                ) from None
            raise MCPCallError(
                f"MCP server {self.name!r} failed {what}: {_describe(error)}"
            ) from None
        except Exception as error:  # anyio's Broken/ClosedResourceError: the streams are gone
            if state is not None:
                state.alive = False
            raise MCPConnectionError(
                f"MCP server {self.name!r} went away while {what} ({type(error).__name__})"
            ) from None

    async def _shutdown(self) -> None:
        state, self._state = self._state, None
        if state is not None:
            await state.close()


class _Connection:
    """The task that holds one session open until it is told to close or the link dies."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.alive = False
        self._session: ClientSession | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def session(self) -> ClientSession:
        assert self._session is not None
        return self._session

    async def open(self) -> None:
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(ready))
        await ready

    def _lost(self) -> None:
        self.alive = False
        # Called from the transport when the server is gone. Tear down a little later: the
        # session's receive loop must first end on its own, because that is where calls in
        # flight learn that the connection closed (a cancelled loop would leave them waiting).
        asyncio.get_running_loop().call_later(_TEARDOWN_DELAY_S, self._stop.set)

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        try:
            async with (
                self.transport.open(self._lost) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                self._session, self.alive = session, True
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as error:
            if not ready.done():
                ready.set_exception(error)
            if isinstance(error, asyncio.CancelledError):
                raise
        finally:
            self.alive = False

    async def close(self) -> None:
        self.alive = False
        self._stop.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 10.0)
            except BaseException:
                self._task.cancel()


def _describe(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        group = cast("BaseExceptionGroup[BaseException]", error)
        return "; ".join(_describe(inner) for inner in group.exceptions)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


_OPEN: weakref.WeakSet[MCPServer] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for server in list(_OPEN):
        with contextlib.suppress(Exception):  # nothing useful to do at exit
            server.close()
