"""The REAL SafeScripts helper daemon for capability tests, started with pytest-xprocess."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.shed.scripts_helper import Helper, serving

__all__ = ["Helper"]

SCRIPTS: dict[str, str] = {
    "greet.sh": '#!/bin/sh\n# Greet the people named in the arguments.\necho "hello $*"\nid -u\n',
    "fail.sh": '#!/bin/sh\n# Complain on stderr and exit with the given status.\necho "oops" >&2\nexit "$1"\n',
    "chatty.sh": (
        "#!/bin/sh\n# Print a numbered line per argument count.\n"
        'i=1; while [ $i -le "$1" ]; do echo "line $i"; i=$((i+1)); done\n'
    ),
}


@pytest.fixture(scope="session")
def _capabilities_helper(xprocess: object) -> Iterator[Helper]:
    with serving(xprocess, "roboz_capabilities_helper", SCRIPTS) as helper:
        yield helper


@pytest.fixture
def helper(needs_root: None, request: pytest.FixtureRequest) -> Helper:
    """Requesting needs_root first makes this skip (or fail in CI) before starting a daemon."""
    daemon: Helper = request.getfixturevalue("_capabilities_helper")
    return daemon
