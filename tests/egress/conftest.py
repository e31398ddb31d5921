"""The test network (netlab.py) for the egress proxy's suites, one per module and worker."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.conftest import skip_or_fail

from .netlab import Lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    if os.geteuid() != 0:
        skip_or_fail("needs root (network namespaces)")
    for tool in ("ip", "curl"):
        if shutil.which(tool) is None:
            skip_or_fail(f"needs {tool} (scripts/setup.sh installs it)")
    lab = Lab(tmp_path_factory.mktemp("egress-lab"))
    try:
        yield lab
    finally:
        lab.close()
