"""A REAL SafeScripts helper daemon for the client and tool tests, started with pytest-xprocess.

Its own scripts (one that streams slowly, one that sleeps in several processes until killed),
so these tests never change what other areas' daemons list.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helper.conftest import processes_with, wait_until
from tests.shed.scripts_helper import Helper, serving

__all__ = ["Helper", "processes_with", "wait_until"]

SCRIPTS: dict[str, str] = {
    "greet.sh": '#!/bin/sh\n# Greet the arguments.\necho "hello $*"\n',
    # $1 lines on stdout and stderr, $2 seconds apart: output arrives while the script runs.
    "slow.sh": (
        "#!/bin/sh\n# Print lines slowly.\n"
        'i=1; while [ $i -le "$1" ]; do echo "tick $i"; echo "warn $i" >&2; sleep "$2"; '
        "i=$((i+1)); done\n"
    ),
    "lots.sh": (
        "#!/bin/sh\n# Print many numbered lines.\n"
        'i=1; while [ $i -le "$1" ]; do echo "line $i"; i=$((i+1)); done\n'
    ),
    # The marker argument is in the cmdline of the script and of both children, so the host's
    # /proc tells whether anything of the run survived; one child escapes with setsid.
    "sleeper.sh": (
        "#!/bin/sh\n# Sleep in three processes until killed.\n"
        "sh -c 'sleep 600' \"$1\" &\n"
        "setsid sh -c 'sleep 600' \"$1\" &\n"
        "echo ready\nwait\n"
    ),
}


@pytest.fixture(scope="session")
def _safe_scripts_helper(xprocess: object) -> Iterator[Helper]:
    with serving(
        xprocess,
        "roboz_safe_scripts_helper",
        SCRIPTS,
        commands=("/bin/echo", "/bin/sh"),
        max_output_bytes=4 << 20,
    ) as helper:
        yield helper


@pytest.fixture
def helper(needs_root: None, request: pytest.FixtureRequest) -> Helper:
    """Requesting needs_root first makes this skip (or fail in CI) before starting a daemon."""
    daemon: Helper = request.getfixturevalue("_safe_scripts_helper")
    return daemon
