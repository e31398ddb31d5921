"""Persisted runs use a real SQLite thread store in a file under tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from roboz.threads import SQLiteThreadStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteThreadStore]:
    opened = SQLiteThreadStore(tmp_path / "runs.db")
    yield opened
    opened.close()
