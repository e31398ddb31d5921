"""A fresh SQLite thread store in a real file under tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from roboz.threads import SQLiteThreadStore


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "threads.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SQLiteThreadStore]:
    opened = SQLiteThreadStore(db_path)
    yield opened
    opened.close()
