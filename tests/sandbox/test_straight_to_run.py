"""A request without a script or file view, handed by the helper straight to the prepared run
process (pid 1 only takes the run's set-up and status pipes from it): the run is isolated and
reported exactly as through pid 1. Each test makes sure that path was taken."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from roboz_helper.sandbox import prepared, run_in_sandbox, runner, zygote

from .conftest import Result, Sandbox

# Time for the zygote's next warm pid 1 to build its root and offer its run process: the
# pid 1 of a request that comes sooner has it sent through pid 1 instead (then it is tried
# again, a few times: a loaded machine may be slower).
READY_S = 0.3
ATTEMPTS = 10


@pytest.fixture
def warm(needs_root: None, tmp_path: Path) -> Sandbox:
    if not runner.USE_ZYGOTE or not zygote.POOL:
        pytest.skip("no zygote or no pool (ROBOZ_SANDBOX_ZYGOTE=0 / ROBOZ_SANDBOX_POOL=0)")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.chown(workspace, 65534, 65534)
    return Sandbox(workspace, tmp_path)


def straight(sandbox: Sandbox, *argv: str, **changes: object) -> Result:
    for _ in range(ATTEMPTS):
        sandbox.exec("/bin/true", **changes)  # the zygote prepares one of this shape after it
        time.sleep(READY_S)
        before = prepared.handed_to_run
        result = sandbox.exec(*argv, **changes)
        if prepared.handed_to_run == before + 1:
            return result
    raise AssertionError(f"no request went straight to the run process in {ATTEMPTS} tries")


def test_the_run_has_nothing_and_pid1_drops_too(warm: Sandbox) -> None:
    r = straight(
        warm,
        "/bin/sh",
        "-c",
        "id -u; id -g; grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status;"
        " i=0; while [ $i -lt 200 ] && [ \"$(awk '/^Uid:/{print $2}' /proc/1/status)\" != 65534 ];"
        " do i=$((i+1)); sleep 0.01; done; grep -E '^(Uid|CapEff|CapPrm):' /proc/1/status",
    )
    assert r.outcome.status == "success", r
    lines = r.out.split()
    assert lines[:2] == ["65534", "65534"], r
    fields = dict(zip(lines[2::2], lines[3::2], strict=False))
    for cap in ("CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"):
        assert int(fields[cap], 16) == 0, r
    assert fields["NoNewPrivs:"] == "1" and fields["Seccomp:"] == "2", r
    pid1 = r.out.split("Uid:")[1].split()
    assert pid1[:4] == ["65534"] * 4, r  # pid 1 dropped to the run uid as well
    assert "CapEff:\t0000000000000000" in r.out and "CapPrm:\t0000000000000000" in r.out, r


def test_the_root_is_read_only_and_the_workdir_writable(warm: Sandbox) -> None:
    r = straight(
        warm, "/bin/sh", "-c", "touch /planted 2>&1; mkdir /run/roboz/x 2>&1; touch mine; ls"
    )
    assert "Read-only file system" in r.out and "mine" in r.out, r
    assert (warm.workspace / "mine").exists() and not Path("/planted").exists()


def test_exit_codes_output_and_a_failed_exec_are_reported(warm: Sandbox) -> None:
    r = straight(warm, "/bin/sh", "-c", "echo out; echo err >&2; exit 3")
    assert (r.outcome.status, r.outcome.exit_code, r.out, r.err) == ("failed", 3, "out\n", "err\n")
    r = straight(warm, "/nonexistent/tool")
    assert r.outcome.status == "failed" and r.outcome.exit_code == 127, r
    assert "could not execute" in r.outcome.diagnostic, r


def test_a_timeout_kills_everything(warm: Sandbox) -> None:
    marker = f"roboz-straight-{os.getpid()}-{time.monotonic_ns()}"
    r = straight(warm, "/bin/bash", "-c", f"exec -a {marker} sleep 60", timeout_s=1.0)
    assert r.outcome.status == "timeout" and r.outcome.limit == "timeout", r
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            assert marker.encode() not in cmdline, f"pid {entry} survived"


def test_back_to_back_runs_each_run_once(warm: Sandbox) -> None:
    """Whichever way each request went (pid 1 may still be preparing, or may have taken the
    pipes and closed its request socket before the helper's empty header arrives), each run
    happens exactly once: nothing falls back to a second start once a run is under way."""

    async def main() -> list[tuple[str, bytes]]:
        done = []
        for i in range(40):
            chunks: list[bytes] = []

            async def collect(stream: int, data: bytes, chunks: list[bytes] = chunks) -> None:
                chunks.append(data)

            spec = warm.spec(argv=["/bin/echo", f"run {i}"])
            outcome = await run_in_sandbox(spec, collect)
            done.append((outcome.status, b"".join(chunks)))
        return done

    before = prepared.handed_to_run
    done = asyncio.run(main())
    assert done == [("success", f"run {i}\n".encode()) for i in range(40)]
    assert prepared.handed_to_run > before, "no request went straight to the run process"
