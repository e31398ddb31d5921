"""Fixtures for the sandbox suites: run a script or a command in a real sandbox, as root.

Every run uses small limits so that each test finishes in seconds.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from roboz_helper.sandbox import SandboxOutcome, SandboxSpec, run_in_sandbox

from . import c_driver as _c_driver

RUN_UID = 65534  # nobody
RUN_GID = 65534
_counter = itertools.count()


@dataclass
class Result:
    outcome: SandboxOutcome
    stdout: bytes
    stderr: bytes
    chunks: list[tuple[int, bytes]]

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    def __str__(self) -> str:
        return f"{self.outcome}\n--- stdout\n{self.out[-3000:]}\n--- stderr\n{self.err[-3000:]}"


class Sandbox:
    """Builds specs around one workspace and runs them.

    ``warm``: every run is preceded by a throw-away run of the same shape, so that the real
    one is handed to the zygote's prepared pid 1 and run process (the pool); the suite runs
    each test both ways, so every attack is tried against cold and warm sandboxes."""

    def __init__(self, workspace: Path, scripts: Path, warm: bool = False) -> None:
        self.workspace = workspace
        self.scripts = scripts
        self.warm = warm
        self.base = SandboxSpec(
            argv=["/bin/true"],
            script_fd=None,
            uid=RUN_UID,
            gid=RUN_GID,
            workdir=str(workspace),
            readonly_paths=(),
            writable_paths=(),
            network="none",
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            timeout_s=10.0,
            max_output_bytes=1 << 20,
            pids_max=64,
            memory_max_bytes=256 << 20,
            tmp_size_bytes=8 << 20,
            max_file_bytes=8 << 20,
            nofile_max=64,
            cpu_time_s=10,
            run_id="test",
        )

    def spec(self, **changes: object) -> SandboxSpec:
        run_id = f"pytest-{os.getpid()}-{next(_counter)}"
        return replace(self.base, run_id=run_id, **changes)  # type: ignore[arg-type]

    def run_spec(self, spec: SandboxSpec) -> Result:
        if self.warm:
            warmup = replace(spec, argv=["/bin/true"], script_fd=None, run_id=spec.run_id + "w")

            async def discard(stream: int, data: bytes) -> None:
                return None

            asyncio.run(run_in_sandbox(warmup, discard))
        chunks: list[tuple[int, bytes]] = []

        async def on_output(stream: int, data: bytes) -> None:
            chunks.append((stream, data))

        outcome = asyncio.run(run_in_sandbox(spec, on_output))
        out = b"".join(d for s, d in chunks if s == 1)
        err = b"".join(d for s, d in chunks if s == 2)
        return Result(outcome, out, err, chunks)

    def exec(self, *argv: str, **changes: object) -> Result:
        return self.run_spec(self.spec(argv=list(argv), **changes))

    def script(self, body: str, *args: str, lang: str = "python", **changes: object) -> Result:
        shebang = {"python": "#!/usr/bin/python3", "bash": "#!/bin/bash"}[lang]
        path = self.scripts / f"attack{next(_counter)}.{'py' if lang == 'python' else 'sh'}"
        path.write_text(shebang + "\n" + textwrap.dedent(body))
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            return self.run_spec(self.spec(argv=[path.name, *args], script_fd=fd, **changes))
        finally:
            os.close(fd)

    def py(self, body: str, *args: str, **changes: object) -> Result:
        return self.script(body, *args, lang="python", **changes)

    def sh(self, body: str, *args: str, **changes: object) -> Result:
        return self.script(body, *args, lang="bash", **changes)


@pytest.fixture(params=["cold", "warm"])
def sandbox(needs_root: None, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.chown(workspace, RUN_UID, RUN_GID)
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    yield Sandbox(workspace, scripts, warm=request.param == "warm")


@pytest.fixture(scope="session")
def c_driver(tmp_path_factory: pytest.TempPathFactory) -> _c_driver.Driver:
    """sandbox-init's own procedures, one call per process (c_driver.c)."""
    return _c_driver.build(tmp_path_factory.mktemp("c_driver"))
