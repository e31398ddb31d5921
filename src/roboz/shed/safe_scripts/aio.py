"""asyncio client for the SafeScripts helper daemon: the blocking client's exchange on asyncio
streams, with the same frames, results and errors (the decoding is shared, not copied).

Cancelling the task that awaits a call closes its connection, and the helper cancels a run
whose client hung up: nothing of the run is left behind. A connection whose run completed is
kept for the next run on the same event loop (see ``client``), unless ``reuse_connections`` is
False.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from types import TracebackType

import msgspec
from roboz_helper import protocol
from roboz_helper.file_policy import FilePolicy
from roboz_helper.protocol import ExecCommand, Greeting, ListScripts, RunScript

from roboz.shed.guard._policy import PermissionPolicy
from roboz.shed.safe_scripts.client import (
    DEFAULT_CAPTURE_BYTES,
    HEADER_SIZE,
    MAX_IDLE_CONNECTIONS,
    ClientRefused,
    ClientSettings,
    ConnectionLost,
    HelperBusy,
    HelperTimeout,
    ListingReader,
    NotStarted,
    OutputCallback,
    RunReader,
    ScriptInfo,
    ShellScriptResult,
    check_greeting,
    command_request,
    connect_error,
    decode_frame,
    first_frame,
    frame_length,
    kept_open,
    owner,
    refused_result,
    run_timeout,
    script_request,
)


@dataclass(frozen=True)
class OutputChunk:
    """Output of a run as it arrives: ``stream`` is "stdout" or "stderr"."""

    stream: str
    data: bytes


class _AsyncConnection:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, timeout: float
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.timeout = timeout
        self.loop = asyncio.get_running_loop()
        self.owner = owner()

    def reusable(self) -> bool:
        """Ours (loop, process, identity), open, and nothing from the helper waiting (a
        Closing frame or EOF)."""
        return (
            self.loop is asyncio.get_running_loop()
            and self.owner == owner()
            and not self.writer.is_closing()
            and not self.reader.at_eof()
            and not _buffered(self.reader)
        )

    async def read_exactly(self, n: int) -> bytes:
        try:
            async with asyncio.timeout(self.timeout):
                return await self.reader.readexactly(n)
        except TimeoutError:
            raise HelperTimeout("timed out waiting for the helper") from None
        except (asyncio.IncompleteReadError, ConnectionResetError):
            raise ConnectionLost("the helper closed the connection unexpectedly") from None

    async def read(self) -> protocol.Response:
        length = frame_length(await self.read_exactly(HEADER_SIZE))
        return decode_frame(await self.read_exactly(length))

    async def send(self, message: protocol.Request) -> None:
        try:
            self.writer.write(protocol.encode_frame(message))
            await self.writer.drain()
        except (BrokenPipeError, ConnectionResetError):
            raise ConnectionLost("the helper closed the connection unexpectedly") from None

    def close(self) -> None:
        # Synchronous on purpose: it must also work in a task that is being cancelled.
        self.writer.close()


class ScriptStream:
    """One run's output as an async iterator of OutputChunk; ``result`` once it is exhausted.

    Use it as ``async with client.stream_script(...) as run: async for chunk in run: ...``:
    leaving the block (or cancelling the task) closes the connection, which ends the run.
    """

    def __init__(self, client: AsyncSafeScriptsClient, request: RunScript | ExecCommand) -> None:
        self.result: ShellScriptResult | None = None
        self._chunks = self._exchange(client, request)

    def __aiter__(self) -> ScriptStream:
        return self

    async def __anext__(self) -> OutputChunk:
        return await self._chunks.__anext__()

    async def aclose(self) -> None:
        await self._chunks.aclose()

    async def __aenter__(self) -> ScriptStream:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _exchange(
        self, client: AsyncSafeScriptsClient, request: RunScript | ExecCommand
    ) -> AsyncGenerator[OutputChunk, None]:
        if client.reuse_connections:
            request = msgspec.structs.replace(request, keep_open=True)
            conn = client.idle.take()
            if conn is not None:
                try:
                    first = await _start(conn, request, reused=True)
                except NotStarted:
                    conn.close()  # the helper closed it unread: once more on a new connection
                except BaseException:
                    conn.close()
                    raise
                else:
                    async for chunk in self._frames(client, conn, first):
                        yield chunk
                    return
        conn = await _connect(client)
        try:
            greeting = check_greeting(await conn.read(), request.file_policy is not None)
        except (ClientRefused, HelperBusy) as exc:
            conn.close()
            self.result = refused_result(exc)
            return
        except BaseException:
            conn.close()
            raise
        conn.timeout = run_timeout(client.timeout, greeting)
        try:
            first = await _start(conn, request, reused=False)
        except BaseException:
            conn.close()
            raise
        async for chunk in self._frames(client, conn, first):
            yield chunk

    async def _frames(
        self, client: AsyncSafeScriptsClient, conn: _AsyncConnection, frame: protocol.Response
    ) -> AsyncGenerator[OutputChunk, None]:
        keep = False
        try:
            run = RunReader(client.max_capture_bytes)
            while True:
                item = run.feed(frame)
                if isinstance(item, ShellScriptResult):
                    self.result = item
                    keep = client.reuse_connections and kept_open(frame)
                    return
                yield OutputChunk(item.stream, item.data)
                frame = await conn.read()
        finally:
            if keep:
                client.idle.keep(conn)
            else:
                conn.close()


async def _start(
    conn: _AsyncConnection, request: RunScript | ExecCommand, reused: bool
) -> protocol.Response:
    """Send the request; its first answer. NotStarted if a reused connection proves unread."""
    try:
        await conn.send(request)
    except ConnectionLost:
        if reused:
            raise NotStarted from None
        raise
    return first_frame(await conn.read(), reused)


class _IdleConnections:
    """A client's kept connections between runs (one run at a time on each)."""

    def __init__(self) -> None:
        self._conns: list[_AsyncConnection] = []

    def take(self) -> _AsyncConnection | None:
        while self._conns:
            conn = self._conns.pop()
            if conn.reusable():
                return conn
            if conn.owner[0] == os.getpid():
                conn.close()
        return None

    def keep(self, conn: _AsyncConnection) -> None:
        if len(self._conns) < MAX_IDLE_CONNECTIONS:
            self._conns.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        conns, self._conns = self._conns, []
        for conn in conns:
            conn.close()


def _buffered(reader: asyncio.StreamReader) -> bool:
    # StreamReader has no public "bytes waiting" query; an idle connection has none.
    return bool(getattr(reader, "_buffer", b""))


class AsyncSafeScriptsClient(ClientSettings):
    """Talk to a roboz-helper on ``socket_path`` from asyncio code; the same calls, results
    and errors as SafeScriptsClient, plus ``stream_script`` / ``stream_command``."""

    def __init__(
        self,
        socket_path: str | os.PathLike[str],
        timeout: float = 10.0,
        max_capture_bytes: int = DEFAULT_CAPTURE_BYTES,
        reuse_connections: bool = True,
        file_policy: PermissionPolicy | FilePolicy | None = None,
    ) -> None:
        super().__init__(socket_path, timeout, max_capture_bytes, reuse_connections, file_policy)
        self.idle = _IdleConnections()

    def close(self) -> None:
        """Close the idle kept connections (a later run connects again)."""
        self.idle.close()

    async def check(self) -> Greeting:
        """Connect and return the helper's greeting, or raise why that is not possible."""
        conn = await _connect(self)
        try:
            return check_greeting(await conn.read())
        finally:
            conn.close()

    async def list_scripts(self) -> list[ScriptInfo]:
        conn = await _connect(self)
        try:
            check_greeting(await conn.read())
            await conn.send(ListScripts())
            listing = ListingReader()
            while (found := listing.feed(await conn.read())) is None:
                pass
            return found
        finally:
            conn.close()

    def stream_script(self, path: str, args: Sequence[str] = ()) -> ScriptStream:
        """Run ``path`` with ``args``, yielding its output as it arrives."""
        return ScriptStream(self, script_request(path, args, self.file_policy))

    def stream_command(self, argv: Sequence[str]) -> ScriptStream:
        """Run an allowlisted executable (argv[0] its absolute path), yielding its output."""
        return ScriptStream(self, command_request(argv, self.file_policy))

    async def run_script(
        self, path: str, args: Sequence[str] = (), on_output: OutputCallback | None = None
    ) -> ShellScriptResult:
        """Run ``path`` (relative to the profile's scripts directory) with ``args``."""
        return await _finish(self.stream_script(path, args), on_output)

    async def exec_command(
        self, argv: Sequence[str], on_output: OutputCallback | None = None
    ) -> ShellScriptResult:
        """Run an allowlisted executable; argv[0] must be its absolute path."""
        return await _finish(self.stream_command(argv), on_output)


async def _connect(settings: ClientSettings) -> _AsyncConnection:
    try:
        async with asyncio.timeout(settings.timeout):
            reader, writer = await asyncio.open_unix_connection(settings.socket_path)
    except OSError as exc:
        raise connect_error(exc, settings.socket_path) from None
    return _AsyncConnection(reader, writer, settings.timeout)


async def _finish(stream: ScriptStream, on_output: OutputCallback | None) -> ShellScriptResult:
    async with stream:
        async for chunk in stream:
            if on_output is not None:
                on_output(chunk.stream, chunk.data)
    assert stream.result is not None
    return stream.result
