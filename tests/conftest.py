"""Shared test configuration.

Tests that need root or kernel namespaces use the ``needs_root`` fixture.  On a developer's
machine without them they skip; under CI (``CI`` set) a skip would hide an untested security
claim, so there it fails instead.
"""

from __future__ import annotations

import os

import pytest


def running_in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def skip_or_fail(reason: str) -> None:
    """Skip locally; fail under CI, where every privileged test must run."""
    if running_in_ci():
        pytest.fail(f"required capability missing in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture
def needs_root() -> None:
    if os.geteuid() != 0:
        skip_or_fail("needs root")
