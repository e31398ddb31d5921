"""asyncio client for the SafeScripts helper daemon: the protocol of core.py carried out on
asyncio streams, with the same calls, frames, results and errors as the blocking client.

Cancelling the task that awaits a call closes its connection, and the helper cancels a run
whose client hung up: nothing of the run is left behind. A connection whose run completed is
kept for the next run on the same event loop (see ``client``), unless ``reuse_connections`` is
False.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Generic

from roboz_helper.protocol import ExecCommand, Greeting, Response, RunScript

from roboz.shed.safe_scripts.client import OutputCallback
from roboz.shed.safe_scripts.core import (
    HEADER_SIZE,
    Connect,
    Emit,
    Keep,
    ReadFrame,
    Send,
    Steps,
    T,
    Wait,
    check_call,
    command_request,
    decode_frame,
    frame_length,
    list_call,
    run_call,
    script_request,
)
from roboz.shed.safe_scripts.results import (
    ConnectionLost,
    HelperTimeout,
    SafeScriptsError,
    ScriptInfo,
    ShellScriptResult,
)
from roboz.shed.safe_scripts.shells import (
    ClientBase,
    IdleConnections,
    connect_error,
    owner,
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
        """Of this loop, open, and nothing from the helper waiting (a Closing frame or EOF)."""
        return (
            self.loop is asyncio.get_running_loop()
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

    async def send(self, data: bytes) -> None:
        try:
            self.writer.write(data)
            await self.writer.drain()
        except (BrokenPipeError, ConnectionResetError):
            raise ConnectionLost("the helper closed the connection unexpectedly") from None

    def close(self) -> None:
        # Synchronous on purpose: it must also work in a task that is being cancelled.
        self.writer.close()


def _buffered(reader: asyncio.StreamReader) -> bool:
    # StreamReader has no public "bytes waiting" query; an idle connection has none.
    return bool(getattr(reader, "_buffer", b""))


class _Outcome(Generic[T]):
    value: T


async def _drive(
    connect: Callable[[], Awaitable[_AsyncConnection]],
    idle: IdleConnections[_AsyncConnection],
    steps: Steps[T],
    outcome: _Outcome[T],
) -> AsyncGenerator[OutputChunk, None]:
    """Carry out the steps of a call (core.py) on asyncio streams; the run's output is
    yielded as it arrives, the call's value left in ``outcome``."""
    conn: _AsyncConnection | None = None
    keep = False
    answer: Response | bool | None = None
    error: SafeScriptsError | None = None
    try:
        while True:
            try:
                step = steps.send(answer) if error is None else steps.throw(error)
            except StopIteration as done:
                outcome.value = done.value
                if keep and conn is not None:
                    idle.keep(conn)
                    conn = None
                return
            answer, error, keep = None, None, False
            try:
                if isinstance(step, ReadFrame):
                    assert conn is not None
                    header = await conn.read_exactly(HEADER_SIZE)
                    answer = decode_frame(await conn.read_exactly(frame_length(header)))
                elif isinstance(step, Send):
                    assert conn is not None
                    await conn.send(step.data)
                elif isinstance(step, Emit):
                    yield OutputChunk(step.stream, step.data)
                elif isinstance(step, Keep):
                    keep = True
                elif isinstance(step, Wait):
                    assert conn is not None
                    conn.timeout = step.seconds
                else:  # TakeIdle or Connect: on to another connection
                    if conn is not None:
                        conn.close()
                        conn = None
                    if isinstance(step, Connect):
                        conn = await connect()
                    else:
                        conn = idle.take(_AsyncConnection.reusable)
                        answer = conn is not None
            except SafeScriptsError as exc:
                error = exc
    finally:
        steps.close()
        if conn is not None:
            conn.close()


class ScriptStream:
    """One run's output as an async iterator of OutputChunk; ``result`` once it is exhausted.

    Use it as ``async with client.stream_script(...) as run: async for chunk in run: ...``:
    leaving the block (or cancelling the task) closes the connection, which ends the run.
    """

    def __init__(
        self, chunks: AsyncGenerator[OutputChunk, None], outcome: _Outcome[ShellScriptResult]
    ) -> None:
        self._chunks = chunks
        self._outcome = outcome

    @property
    def result(self) -> ShellScriptResult | None:
        return getattr(self._outcome, "value", None)

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


class AsyncSafeScriptsClient(ClientBase[_AsyncConnection]):
    """Talk to a roboz-helper on ``socket_path`` from asyncio code; the same calls, results
    and errors as SafeScriptsClient, plus ``stream_script`` / ``stream_command``."""

    async def check(self) -> Greeting:
        """Connect and return the helper's greeting, or raise why that is not possible."""
        return await self._call(check_call())

    async def list_scripts(self) -> list[ScriptInfo]:
        return await self._call(list_call())

    def stream_script(self, path: str, args: Sequence[str] = ()) -> ScriptStream:
        """Run ``path`` with ``args``, yielding its output as it arrives."""
        return self._stream(script_request(path, args, self.file_policy, self.network_allow))

    def stream_command(self, argv: Sequence[str]) -> ScriptStream:
        """Run an allowlisted executable (argv[0] its absolute path), yielding its output."""
        return self._stream(command_request(argv, self.file_policy, self.network_allow))

    def _stream(self, request: RunScript | ExecCommand) -> ScriptStream:
        outcome: _Outcome[ShellScriptResult] = _Outcome()
        steps = run_call(self.settings, request)
        return ScriptStream(_drive(self._connect, self.idle, steps, outcome), outcome)

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

    async def _call(self, steps: Steps[T]) -> T:
        outcome: _Outcome[T] = _Outcome()
        async for _ in _drive(self._connect, self.idle, steps, outcome):
            pass  # check and list_scripts emit no output
        return outcome.value

    async def _connect(self) -> _AsyncConnection:
        try:
            async with asyncio.timeout(self.timeout):
                reader, writer = await asyncio.open_unix_connection(self.socket_path)
        except OSError as exc:
            raise connect_error(exc, self.socket_path) from None
        return _AsyncConnection(reader, writer, self.timeout)


async def _finish(stream: ScriptStream, on_output: OutputCallback | None) -> ShellScriptResult:
    async with stream:
        async for chunk in stream:
            if on_output is not None:
                on_output(chunk.stream, chunk.data)
    assert stream.result is not None
    return stream.result
