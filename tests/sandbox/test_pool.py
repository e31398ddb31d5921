"""The zygote's warm sandboxes (pool): each is used by one run at most, and one built before
the system template was rebuilt is never used."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest
from roboz_helper.sandbox import run_in_sandbox, runner, zygote, zygote_client

from .conftest import Sandbox

# What a run prints about its sandbox: its namespaces and how long ago its pid 1 started.
IDENTITY = (
    "for ns in mnt net pid ipc uts; do readlink /proc/self/ns/$ns; done; "
    "read up _ < /proc/uptime; start=$(cut -d' ' -f22 /proc/1/stat); "
    'echo "age $up $start $(getconf CLK_TCK)"'
)


def _pid1_age(out: str) -> float:
    """Seconds between the start of the run's pid 1 and the run printing its identity."""
    up, start, tck = out.split("age ")[1].split()
    return float(up) - int(start) / int(tck)


def _needs_pool() -> None:
    if not runner.USE_ZYGOTE or not zygote.POOL:
        pytest.skip("no zygote or no pool (ROBOZ_SANDBOX_ZYGOTE=0 / ROBOZ_SANDBOX_POOL=0)")


async def _discard(stream: int, data: bytes) -> None:
    return None


def test_a_warm_sandbox_is_used_by_one_run_only(sandbox: Sandbox) -> None:
    """Two runs of the same shape, the first still running while the second starts (so both
    sandboxes exist at once and namespace numbers cannot be recycled in between): every
    namespace differs, whichever run got a prepared sandbox."""
    release = sandbox.workspace / "release"

    async def main() -> tuple[str, str]:
        out1: list[bytes] = []
        out2: list[bytes] = []

        async def on1(stream: int, data: bytes) -> None:
            out1.append(data)

        async def on2(stream: int, data: bytes) -> None:
            out2.append(data)

        await run_in_sandbox(sandbox.spec(), _discard)  # prepares a warm one of this shape
        first = asyncio.ensure_future(run_in_sandbox(sandbox.spec(
            argv=["/bin/sh", "-c", IDENTITY + "; while [ ! -e release ]; do sleep 0.02; done"]
        ), on1))  # fmt: skip
        while b"age" not in b"".join(out1):  # bounded by the run's timeout
            if first.done():
                break
            await asyncio.sleep(0.01)
        second = await run_in_sandbox(
            sandbox.spec(argv=["/bin/sh", "-c", IDENTITY + "; touch release"]), on2
        )
        done = await first
        assert second.status == "success" and done.status == "success", (second, done)
        return b"".join(out1).decode(), b"".join(out2).decode()

    try:
        one, two = asyncio.run(main())
    finally:
        release.unlink(missing_ok=True)
    ns1, ns2 = one.splitlines()[:5], two.splitlines()[:5]
    assert len(ns1) == 5 and all(a != b for a, b in zip(ns1, ns2, strict=True)), (one, two)


def _age_of_second_run(sandbox: Sandbox, gap_s: float) -> float:
    async def main() -> str:
        out: list[bytes] = []

        async def collect(stream: int, data: bytes) -> None:
            out.append(data)

        await run_in_sandbox(sandbox.spec(), _discard)  # a warm one is prepared after it
        await asyncio.sleep(gap_s)
        outcome = await run_in_sandbox(sandbox.spec(argv=["/bin/sh", "-c", IDENTITY]), collect)
        assert outcome.status == "success", outcome
        return b"".join(out).decode()

    return _pid1_age(asyncio.run(main()))


def _restart_zygote() -> None:
    proc = zygote_client.get().proc
    if proc is not None and proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_warm_sandbox_from_before_a_template_rebuild_is_not_used(
    needs_root: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The system template is rebuilt when it is older than its TTL (so that a replaced
    /etc/passwd reaches later runs); a warm pid 1 cloned from the old build must not serve a
    run after that. Seen from inside: the run's pid 1 was started ahead of the request (its
    age covers the 1 s gap) with the normal TTL, and for the request with a 0.3 s TTL."""
    _needs_pool()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.chown(workspace, 65534, 65534)
    sandbox = Sandbox(workspace, tmp_path)
    gap = 1.0
    try:
        _restart_zygote()
        monkeypatch.delenv("ROBOZ_SANDBOX_TEMPLATE_TTL_S", raising=False)
        assert _age_of_second_run(sandbox, gap) >= gap / 2  # the pool is in use
        _restart_zygote()
        monkeypatch.setenv("ROBOZ_SANDBOX_TEMPLATE_TTL_S", "0.3")
        started = time.monotonic()
        age = _age_of_second_run(sandbox, gap)
        assert age < min(gap / 2, time.monotonic() - started), age  # built for the request
    finally:
        monkeypatch.delenv("ROBOZ_SANDBOX_TEMPLATE_TTL_S", raising=False)
        _restart_zygote()  # the next test gets a zygote with the normal TTL
