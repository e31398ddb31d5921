"""asyncio client for the SafeScripts helper daemon: the blocking client's exchange on asyncio
streams, with the same frames, results and errors (the decoding is shared, not copied).

Cancelling the task that awaits a call closes its connection, and the helper cancels a run
whose client hung up: nothing of the run is left behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from types import TracebackType

from roboz_helper import protocol
from roboz_helper.protocol import ExecCommand, Greeting, ListScripts, RunScript

from roboz.shed.safe_scripts.client import (
    HEADER_SIZE,
    ClientRefused,
    ClientSettings,
    ConnectionLost,
    HelperBusy,
    HelperTimeout,
    ListingReader,
    OutputCallback,
    RunReader,
    ScriptInfo,
    ShellScriptResult,
    check_greeting,
    command_request,
    connect_error,
    decode_frame,
    frame_length,
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
        conn = await _connect(client)
        try:
            try:
                greeting = check_greeting(await conn.read())
            except (ClientRefused, HelperBusy) as exc:
                self.result = refused_result(exc)
                return
            conn.timeout = run_timeout(client.timeout, greeting)
            await conn.send(request)
            run = RunReader(client.max_capture_bytes)
            while True:
                item = run.feed(await conn.read())
                if isinstance(item, ShellScriptResult):
                    self.result = item
                    return
                yield OutputChunk(item.stream, item.data)
        finally:
            conn.close()


class AsyncSafeScriptsClient(ClientSettings):
    """Talk to a roboz-helper on ``socket_path`` from asyncio code; the same calls, results
    and errors as SafeScriptsClient, plus ``stream_script`` / ``stream_command``."""

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
        return ScriptStream(self, script_request(path, args))

    def stream_command(self, argv: Sequence[str]) -> ScriptStream:
        """Run an allowlisted executable (argv[0] its absolute path), yielding its output."""
        return ScriptStream(self, command_request(argv))

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
