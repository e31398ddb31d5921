"""A server of the scripted UI agent (tests/server/ui/agents.py) for the AG-UI tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from roboz.server import create_app
from tests.postgres import open_store
from tests.server.conftest import Served, serve
from tests.server.ui.agents import make_agent


@pytest.fixture
def agui_served(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Served]:
    store: Any = open_store("sqlite", tmp_path, request)
    served = serve(create_app([make_agent(), make_agent("slow", 0.2)], store), store)
    yield served
    served.stop()
    store.close()
