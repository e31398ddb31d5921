"""Transports to an MCP server: a child process over stdio, or streamable HTTP.

The stdio transport is ours rather than the SDK's ``stdio_client`` because we need the child's
process group: the server starts in a new session, and closing the transport ends the whole
group (a server's own helpers included), not only the process we started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

import anyio
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.shared.message import SessionMessage

ReadStream = MemoryObjectReceiveStream[SessionMessage | Exception]
WriteStream = MemoryObjectSendStream[SessionMessage]

# After stdin closes, a well-behaved server exits on its own; then SIGTERM, then SIGKILL.
EXIT_GRACE_S = 2.0
TERM_GRACE_S = 2.0
# How often the server process is checked for having exited, and how long after its exit the
# replies it wrote before it went may still be read from the pipe.
EXIT_POLL_S = 0.1
EXIT_DRAIN_S = 0.3


class Transport(Protocol):
    """Opens the streams a ClientSession speaks over; ``on_lost`` fires when they die."""

    @property
    def description(self) -> str: ...

    def open(
        self, on_lost: Callable[[], None]
    ) -> contextlib.AbstractAsyncContextManager[tuple[ReadStream, WriteStream]]: ...


@dataclass
class StdioTransport:
    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    stderr: IO[Any] | int | None = None
    pid: int | None = field(default=None, init=False)

    @property
    def description(self) -> str:
        return " ".join([self.command, *self.args])

    @contextlib.asynccontextmanager
    async def open(
        self, on_lost: Callable[[], None]
    ) -> AsyncGenerator[tuple[ReadStream, WriteStream], None]:
        environment = None if self.env is None else {**os.environ, **self.env}
        process = await anyio.open_process(
            [self.command, *self.args],
            env=environment,
            cwd=self.cwd,
            stderr=self.stderr,
            start_new_session=True,  # its own process group, so we can end all of it
        )
        self.pid = process.pid
        read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
        stdout_ended = anyio.Event()

        async def read_stdout() -> None:
            assert process.stdout is not None
            buffer = b""
            try:
                async with read_send:
                    async for chunk in process.stdout:
                        *lines, buffer = (buffer + chunk).split(b"\n")
                        for line in lines:
                            if not line.strip():
                                continue
                            try:
                                message = types.JSONRPCMessage.model_validate_json(line)
                            except ValueError as error:
                                await read_send.send(error)
                                continue
                            await read_send.send(SessionMessage(message))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                stdout_ended.set()
                on_lost()

        async def watch_exit() -> None:
            # EOF on stdout is not enough: a child of the server that inherited its stdout
            # keeps the pipe open after the server itself has gone, and every call would wait
            # out its timeout. So the process is watched too. Polled: asyncio's wait() (3.11)
            # returns only once the pipes have closed, which is exactly what does not happen.
            while process.returncode is None:
                await anyio.sleep(EXIT_POLL_S)
            with anyio.move_on_after(EXIT_DRAIN_S):
                await stdout_ended.wait()
            if not stdout_ended.is_set():
                on_lost()
                # Ends the session's receive loop as EOF would: calls in flight fail with
                # "connection closed", and the next call reconnects. The leftover child goes
                # with the server's process group when the transport closes.
                await read_send.aclose()

        async def write_stdin() -> None:
            assert process.stdin is not None
            try:
                async with write_receive:
                    async for outgoing in write_receive:
                        data = outgoing.message.model_dump_json(by_alias=True, exclude_none=True)
                        await process.stdin.send(data.encode() + b"\n")
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                on_lost()  # the server is gone; callers see the closed stream

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(read_stdout)
                group.start_soon(write_stdin)
                group.start_soon(watch_exit)
                try:
                    yield read_receive, write_send
                finally:
                    with anyio.CancelScope(shield=True):
                        await _end_process_group(process)
                    group.cancel_scope.cancel()
        finally:
            self.pid = None


async def _end_process_group(process: Process) -> None:
    """stdin closed -> wait -> SIGTERM the group -> wait -> SIGKILL; leftovers always go."""
    group = process.pid
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            await process.stdin.aclose()
    exited = False
    with anyio.move_on_after(EXIT_GRACE_S):
        await process.wait()
        exited = True
    if not exited:
        _signal_group(group, signal.SIGTERM)
        with anyio.move_on_after(TERM_GRACE_S):
            await process.wait()
            exited = True
    # Whatever the server started and left behind in its group ends with it.
    _signal_group(group, signal.SIGKILL)
    with contextlib.suppress(Exception):
        await process.aclose()  # reaps it and closes the pipes and the transport


def _signal_group(group: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)


@dataclass
class HttpTransport:
    url: str
    headers: Mapping[str, str] | None = None
    timeout: float = 30.0

    @property
    def description(self) -> str:
        return self.url

    @contextlib.asynccontextmanager
    async def open(
        self, on_lost: Callable[[], None]
    ) -> AsyncGenerator[tuple[ReadStream, WriteStream], None]:
        import httpx
        from mcp.client.streamable_http import streamable_http_client

        client = httpx.AsyncClient(
            headers=dict(self.headers or {}),
            timeout=httpx.Timeout(self.timeout, read=max(self.timeout, 300.0)),
            follow_redirects=True,
        )
        async with client, streamable_http_client(self.url, http_client=client) as streams:
            yield streams[0], streams[1]


DEVNULL = subprocess.DEVNULL
