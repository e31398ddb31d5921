"""A fresh thread store per test, on each backend: a SQLite file under tmp_path and a new
schema in the session's PostgreSQL cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.postgres import open_store


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "threads.db"


@pytest.fixture
def store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    opened = open_store(backend, tmp_path, request)
    yield opened
    opened.close()
