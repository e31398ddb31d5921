"""A real ``roboz serve`` application on a real uvicorn server on a loopback port of its own
(bound to port 0), over a fresh thread store, with tokens for two organizations:
ann (admin of acme), bob and cat (acme), eve (globex)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from roboz.server import ThreadClient, create_app
from roboz.threads import Caller
from tests.postgres import open_store
from tests.server.agents import make_agent

PEOPLE = {
    "ann": Caller("ann", "acme", admin=True),
    "bob": Caller("bob", "acme"),
    "cat": Caller("cat", "acme"),
    "eve": Caller("eve", "globex"),
}


@dataclass
class Served:
    url: str
    store: Any
    tokens: dict[str, str]
    server: uvicorn.Server
    thread: threading.Thread
    clients: list[ThreadClient] = field(default_factory=list[ThreadClient])

    def client(self, who: str) -> ThreadClient:
        client = ThreadClient(self.url, self.tokens[who], timeout=30)
        self.clients.append(client)
        return client

    def stop(self) -> None:
        for client in self.clients:
            client.close()
        self.server.should_exit = True
        self.thread.join(30)


def serve(app: Any, store: Any) -> Served:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=lambda: asyncio.run(server.serve(sockets=[sock])), name="uvicorn", daemon=True
    )
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the server did not start")
        threading.Event().wait(0.01)
    tokens = {who: store.create_api_token(caller)[1] for who, caller in PEOPLE.items()}
    return Served(f"http://127.0.0.1:{port}", store, tokens, server, thread)


@pytest.fixture
def served_on(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """``served_on(backend, **create_app options)``: a started server; stopped afterwards."""
    started: list[Served] = []

    def start(backend: str = "sqlite", **options: Any) -> Served:
        store = open_store(backend, tmp_path, request)
        agents = options.pop("agents", None) or [
            make_agent(),
            make_agent("slow", pause_s=0.05),
            make_agent("picker", picks=True),
        ]
        app = create_app(agents, store, **options)
        served = serve(app, store)
        started.append(served)
        return served

    yield start
    for served in started:
        served.stop()
        served.store.close()


@pytest.fixture
def served(served_on: Any) -> Served:
    served: Served = served_on("sqlite", keepalive_s=1.0)
    return served
