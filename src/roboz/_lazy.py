"""Public names that load on first use (PEP 562).

`import roboz` and the `roboz` command must not pay for pydantic models, the openai SDK,
asyncio and the agent loop before something needs them, so a package that re-exports those
names gets its module ``__getattr__`` from here; type checkers see the plain imports under
``TYPE_CHECKING`` in the package instead.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A ``__getattr__`` for ``package`` that imports each name of ``homes`` (name -> the
    module that defines it) on first access and keeps it, so later look-ups skip it."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
