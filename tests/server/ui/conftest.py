"""Real headless Chromium (Debian's /usr/bin/chromium, driven by Playwright; never a browser
Playwright downloads) against a real ``roboz serve`` on a loopback port that survives a
restart, so a test can drop every connection and bring the server back."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from roboz.server import ThreadClient, create_app
from tests.conftest import skip_or_fail
from tests.postgres import open_store
from tests.server.conftest import PEOPLE
from tests.server.ui.agents import make_agent

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass
class UiServer:
    """A server of the scripted agents over one store, on one port across restarts."""

    store: Any
    port: int = 0
    tokens: dict[str, str] = field(default_factory=dict[str, str])
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None
    _clients: list[ThreadClient] = field(default_factory=list[ThreadClient])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        app = create_app([make_agent(), make_agent("slow", 0.08)], self.store, keepalive_s=1.0)
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True
        )
        thread.start()
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the server did not start")
            threading.Event().wait(0.01)
        self._server, self._thread = server, thread

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(30)
        self._server = self._thread = None

    def client(self, who: str) -> ThreadClient:
        client = ThreadClient(self.url, self.tokens[who], timeout=30)
        self._clients.append(client)
        return client

    def close(self) -> None:
        for client in self._clients:
            client.close()
        self.stop()


@pytest.fixture
def ui_server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[UiServer]:
    store: Any = open_store("sqlite", tmp_path, request)
    server = UiServer(store)
    server.tokens = {who: store.create_api_token(caller)[1] for who, caller in PEOPLE.items()}
    server.start()
    yield server
    server.close()
    store.close()


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[Any]:
    """``chromium(name)``: a fresh browser (its own --user-data-dir) showing 1200x800."""
    if not os.access(CHROMIUM, os.X_OK):
        skip_or_fail("Chromium is not installed (scripts/setup.sh installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        opened: list[Any] = []

        def launch(name: str) -> Any:
            context = playwright.chromium.launch_persistent_context(
                str(tmp_path / f"chromium-{name}"),
                executable_path=CHROMIUM,
                args=ARGS,
                headless=True,
                viewport={"width": 1200, "height": 800},
            )
            opened.append(context)
            page = context.pages[0] if context.pages else context.new_page()
            page.set_default_timeout(20_000)
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.errors = errors
            return page

        yield launch
        for context in opened:
            context.close()


def sign_in(page: Any, server: UiServer, who: str) -> None:
    page.goto(f"{server.url}/")
    page.get_by_label("API token").fill(server.tokens[who])
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("navigation", name="Threads").wait_for()
