"""Blocking client for the SafeScripts helper daemon: the protocol of core.py carried out on
blocking sockets.

A call connects, reads the helper's greeting, sends one request and reads frames until the single
RunCompletion. A run asks the helper to keep the connection open (``keep_open``); the next run
from this client reuses it when it is idle, still alive, and this process and its identity are
the ones that connected (peer credentials are the connection's). If the helper closes it
instead of reading the request (Closing, or the send fails), the request is sent once more on a
new connection; anything else that goes wrong on a connection closes it.

Transport and protocol failures raise SafeScriptsError subclasses;
a run that was refused, timed out or hit a limit is a normal result with that status, so an
agent can read the diagnostic and react.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Callable, Sequence

from roboz_helper.protocol import Greeting, Response

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
    ClientRefused,
    ConnectionLost,
    HelperBusy,
    HelperProtocolError,
    HelperTimeout,
    HelperUnavailable,
    ProtocolMismatch,
    SafeScriptsError,
    ScriptInfo,
    ShellScriptResult,
)
from roboz.shed.safe_scripts.shells import (
    ClientBase,
    ClientSettings,
    connect_error,
    owner,
)

__all__ = [
    "ClientRefused",
    "ClientSettings",
    "ConnectionLost",
    "HelperBusy",
    "HelperProtocolError",
    "HelperTimeout",
    "HelperUnavailable",
    "OutputCallback",
    "ProtocolMismatch",
    "SafeScriptsClient",
    "SafeScriptsError",
    "ScriptInfo",
    "ShellScriptResult",
]

OutputCallback = Callable[[str, bytes], None]


class _Connection:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.owner = owner()

    def alive(self) -> bool:
        """Nothing pending and not hung up: an idle connection the helper has not closed
        (a Closing frame or EOF waiting would make it readable)."""
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)
        return not poller.poll(0)

    def close(self) -> None:
        self.sock.close()

    def recv_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except TimeoutError:
                raise HelperTimeout("timed out waiting for the helper") from None
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                raise ConnectionLost("the helper closed the connection unexpectedly")
            buf += chunk
        return bytes(buf)

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            raise ConnectionLost("the helper closed the connection unexpectedly") from None


class SafeScriptsClient(ClientBase[_Connection]):
    """Talk to a roboz-helper on `socket_path`.

    `timeout` bounds connecting and each wait for a frame; while a run is in progress the wait
    is stretched to the run's own time limit announced in the greeting. Runs reuse kept
    connections (one run at a time on each) unless `reuse_connections` is False; `close()`
    drops the idle ones. With `file_policy` (the agent's PermissionPolicy) every run is
    narrowed by it inside the sandbox; a helper too old to apply it gets no run at all.
    """

    def check(self) -> Greeting:
        """Connect and return the helper's greeting, or raise why that is not possible."""
        return self._call(check_call(), None)

    def list_scripts(self) -> list[ScriptInfo]:
        return self._call(list_call(), None)

    def run_script(
        self,
        path: str,
        args: Sequence[str] = (),
        on_output: OutputCallback | None = None,
    ) -> ShellScriptResult:
        """Run `path` (relative to the profile's scripts directory) with `args`."""
        request = script_request(path, args, self.file_policy, self.network_allow)
        return self._call(run_call(self.settings, request), on_output)

    def exec_command(
        self, argv: Sequence[str], on_output: OutputCallback | None = None
    ) -> ShellScriptResult:
        """Run an allowlisted executable; argv[0] must be its absolute path."""
        request = command_request(argv, self.file_policy, self.network_allow)
        return self._call(run_call(self.settings, request), on_output)

    def _connect(self) -> _Connection:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except OSError as exc:
            sock.close()
            raise connect_error(exc, self.socket_path) from None
        return _Connection(sock)

    def _call(self, steps: Steps[T], on_output: OutputCallback | None) -> T:
        """Carry out the steps of a call (core.py) on blocking sockets."""
        conn: _Connection | None = None
        keep = False
        answer: Response | bool | None = None
        error: SafeScriptsError | None = None
        try:
            while True:
                try:
                    step = steps.send(answer) if error is None else steps.throw(error)
                except StopIteration as done:
                    if keep and conn is not None:
                        self.idle.keep(conn)
                        conn = None
                    return done.value
                answer, error, keep = None, None, False
                try:
                    if isinstance(step, ReadFrame):
                        assert conn is not None
                        header = conn.recv_exactly(HEADER_SIZE)
                        answer = decode_frame(conn.recv_exactly(frame_length(header)))
                    elif isinstance(step, Send):
                        assert conn is not None
                        conn.send(step.data)
                    elif isinstance(step, Emit):
                        if on_output is not None:
                            on_output(step.stream, step.data)
                    elif isinstance(step, Keep):
                        keep = True
                    elif isinstance(step, Wait):
                        assert conn is not None
                        conn.sock.settimeout(step.seconds)
                    else:  # TakeIdle or Connect: on to another connection
                        if conn is not None:
                            conn.close()
                            conn = None
                        if isinstance(step, Connect):
                            conn = self._connect()
                        else:
                            conn = self.idle.take(_Connection.alive)
                            answer = conn is not None
                except SafeScriptsError as exc:
                    error = exc
        finally:
            steps.close()
            if conn is not None:
                conn.close()
