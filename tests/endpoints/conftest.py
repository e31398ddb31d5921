"""Fixtures of the endpoint tests: a local OpenAI-compatible server (see openai_fake.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.endpoints.openai_fake import FakeOpenAIServer


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
