"""The library client against the real daemon: what callers see for limits, signals, caps
and their own mistakes."""

from __future__ import annotations

import uuid

import pytest

from roboz.shed.safe_scripts import SafeScriptsClient, ShellScriptResult

from .conftest import (
    NOBODY,
    TIGHT_OUTPUT_BYTES,
    TIGHT_TIMEOUT_S,
    TIGHT_UID,
    HelperDaemon,
    as_user,
    processes_with,
    wait_until,
)

pytestmark = pytest.mark.root


def _as_tight_client(socket_path: str, *, script: str, args: list[str]) -> ShellScriptResult:
    """Run a script as the uid whose profile has the small limits; return its result."""
    import ast

    def job() -> str:
        r = SafeScriptsClient(socket_path).run_script(script, args)
        return repr((r.status, r.limit, r.exit_code, r.signal, len(r.stdout), r.diagnostic))

    status, limit, exit_code, signal, out_len, diagnostic = ast.literal_eval(
        as_user(TIGHT_UID, TIGHT_UID, job)
    )
    return ShellScriptResult(
        status=status,
        exit_code=exit_code,
        signal=signal,
        stdout="x" * out_len,
        stderr="",
        diagnostic=diagnostic,
        wall_time_s=0.0,
        cpu_time_s=0.0,
        peak_memory_bytes=0,
        limit=limit,
    )


def test_the_greeting_of_another_profile(helper: HelperDaemon) -> None:
    def job() -> str:
        g = SafeScriptsClient(helper.socket_path).check()
        return f"{g.profile} {g.uid} {g.limits.timeout_s} {g.limits.max_output_bytes}"

    assert as_user(TIGHT_UID, TIGHT_UID, job) == (
        f"tight {TIGHT_UID} {TIGHT_TIMEOUT_S} {TIGHT_OUTPUT_BYTES}"
    )


def test_a_timeout_is_reported_with_its_limit_and_kills_everything(helper: HelperDaemon) -> None:
    marker = f"roboz-timeout-{uuid.uuid4().hex}"
    result = _as_tight_client(helper.socket_path, script="sleeper.sh", args=[marker])
    assert (result.status, result.limit) == ("timeout", "timeout"), result
    # The setsid grandchild too: nothing of the run outlives its deadline.
    wait_until(lambda: not processes_with(marker), what="the timed-out run's processes gone")


def test_an_output_flood_is_cut_at_the_cap(helper: HelperDaemon) -> None:
    result = _as_tight_client(helper.socket_path, script="lots.sh", args=["100000"])
    assert (result.status, result.limit) == ("output_limit", "output"), result
    assert len(result.stdout) <= TIGHT_OUTPUT_BYTES


def test_death_by_signal(helper: HelperDaemon) -> None:
    result = SafeScriptsClient(helper.socket_path).run_script("selfkill.sh")
    # Death by a signal is "killed"; limit None says no limit of ours sent it.
    assert (result.status, result.limit) == ("killed", None), result
    assert (result.exit_code, result.signal) == (None, 9)
    assert result.exit_status == 128 + 9
    assert result.stdout == "bye\n"


def test_the_client_caps_what_it_keeps(helper: HelperDaemon) -> None:
    seen = bytearray()
    client = SafeScriptsClient(helper.socket_path, max_capture_bytes=100)
    result = client.run_script("lots.sh", ["1000"], on_output=lambda s, d: seen.extend(d))
    assert result.status == "success"
    assert result.output_truncated
    assert len(result.stdout) == 100
    assert result.stdout == seen.decode()[:100]
    # The callback still saw everything: the cap is about memory, not about streaming.
    assert seen.decode().count("\n") == 1000 + 1  # 1000 lines + "err 1000"


def test_a_failing_callback_ends_the_run(helper: HelperDaemon) -> None:
    marker = f"roboz-callback-{uuid.uuid4().hex}"

    class Stop(Exception):
        pass

    def explode(stream: str, data: bytes) -> None:
        wait_until(lambda: len(processes_with(marker)) >= 3, what="the run's processes")
        raise Stop

    with pytest.raises(Stop):
        SafeScriptsClient(helper.socket_path).run_script("sleeper.sh", [marker], on_output=explode)
    wait_until(lambda: not processes_with(marker), what="the abandoned run killed")


def test_runs_use_the_profile_user(helper: HelperDaemon) -> None:
    result = SafeScriptsClient(helper.socket_path).exec_command(["/bin/sh", "-c", "id -u; id -g"])
    assert result.stdout == f"{NOBODY}\n{NOBODY}\n"
