"""Running the application with uvicorn until SIGTERM or SIGINT, as ``roboz serve`` does.

Shutdown, in order: the listening socket closes, every live stream ends (clients reconnect
elsewhere with their last token), running turns get the grace period to finish and are then
cancelled, their end recorded in their threads; then the process exits 0.
"""

from __future__ import annotations

import gc
import logging
import signal
import socket
import sys
from types import FrameType

import uvicorn
from fastapi import FastAPI

from roboz.server.state import ServerState


class _Server(uvicorn.Server):
    """uvicorn's server, ending the streams first when asked to stop: uvicorn waits for open
    connections before the application's shutdown, and a stream would otherwise hold it."""

    def __init__(self, config: uvicorn.Config, state: ServerState) -> None:
        super().__init__(config)
        self.roboz = state

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        loop = self.roboz.hub._loop  # pyright: ignore[reportPrivateUsage]
        if loop is not None:
            loop.call_soon_threadsafe(self.roboz.hub.close)
        super().handle_exit(sig, frame)
        if sig == signal.SIGTERM:
            # uvicorn raises the signal again once it shut down, which would end the process
            # by SIGTERM; a graceful stop on request exits 0 (SIGINT still ends as Ctrl-C).
            captured: list[int] = getattr(self, "_captured_signals", [])
            while signal.SIGTERM in captured:
                captured.remove(signal.SIGTERM)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0: a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def run(app: FastAPI, sock: socket.socket, *, grace_s: float, log_level: str = "info") -> None:
    """Serve ``app`` on ``sock`` until a signal stops it."""
    logging.basicConfig(
        level=log_level.upper(),
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    state: ServerState = app.state.roboz
    config = uvicorn.Config(
        app,
        log_config=None,
        log_level=log_level,
        access_log=False,  # the application's own JSON access log replaces it
        lifespan="on",
        timeout_graceful_shutdown=int(grace_s) + 35,
        timeout_keep_alive=30,
    )
    server = _Server(config, state)
    # uvicorn runs each request in a task of its own, made once the request arrived: what
    # reading the store's change stamp once per round of the loop relies on.
    state.thread_cache.share_stamps = True
    # Everything imported and built so far lives as long as the process: moved out of the
    # collector's reach, a full collection no longer walks it (~100 ms here, which stalled
    # every live stream at once) and costs only what requests and streams allocate.
    gc.collect()
    gc.freeze()
    host, port = sock.getsockname()[:2]
    where = f"[{host}]" if ":" in host else host
    print(f"roboz serve: listening on http://{where}:{port}", file=sys.stderr, flush=True)
    server.run(sockets=[sock])


__all__ = ["bind", "run"]
