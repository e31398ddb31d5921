"""The rootless pipeline (helper not root): exercised by a forked child of the test that drops
to an unprivileged uid and then calls ``run_in_sandbox`` like a developer's helper would."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import time

import prctl
from roboz_helper.sandbox import SandboxSpec, run_in_sandbox, support

OUTER_UID = 65534


def _run_unprivileged(argv: list[str], workdir: str, timeout_s: float) -> dict[str, object]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            os.close(r)
            os.setgroups([])
            os.setresgid(OUTER_UID, OUTER_UID, OUTER_UID)
            os.setresuid(OUTER_UID, OUTER_UID, OUTER_UID)
            prctl.set_dumpable(1)  # as if started by the user, not dropped from root
            support._cached = None
            ok, why = support.sandbox_support()
            chunks: list[bytes] = []

            async def on_output(stream: int, data: bytes) -> None:
                chunks.append(data)

            spec = SandboxSpec(
                argv=argv, script_fd=None, uid=1000, gid=1000, workdir=workdir,
                readonly_paths=(), writable_paths=(), network="none",
                env={"PATH": "/usr/bin:/bin"}, timeout_s=timeout_s, max_output_bytes=1 << 20,
                pids_max=64, memory_max_bytes=256 << 20, tmp_size_bytes=8 << 20,
                max_file_bytes=8 << 20, nofile_max=64, cpu_time_s=10, run_id="rootless",
            )  # fmt: skip
            outcome = asyncio.run(run_in_sandbox(spec, on_output))
            result = {"support": [ok, why], "status": outcome.status, "limit": outcome.limit,
                      "out": b"".join(chunks).decode()}  # fmt: skip
        except BaseException as exc:
            result = {"error": repr(exc)}
        os.write(w, json.dumps(result).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)


def test_rootless_run_is_isolated_and_killed(needs_root: None) -> None:
    workdir = tempfile.mkdtemp(prefix="roboz-rootless-", dir="/tmp")
    try:
        _check_rootless(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _check_rootless(workdir: str) -> None:
    os.chmod(workdir, 0o777)
    marker = f"roboz-rootless-{time.monotonic_ns()}"
    res = _run_unprivileged(
        ["/bin/bash", "-c",
         "id -u; cat /proc/self/uid_map; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' "
         f"/proc/self/status; ls /; echo hi > made; (exec -a {marker} sleep 60) & sleep 60"],
        workdir,
        timeout_s=2.0,
    )  # fmt: skip
    assert "error" not in res, res
    assert res["support"][0] is True and "rootless" in res["support"][1]  # type: ignore[index]
    assert res["status"] == "timeout" and res["limit"] == "timeout", res
    lines = str(res["out"]).split()
    assert lines[0] == "1000"  # the spec's uid inside, mapped onto the helper's own uid
    assert lines[1:4] == ["1000", "0", "1"]
    assert lines[4:12] == ["CapEff:", "0000000000000000", "CapBnd:", "0000000000000000",
                           "NoNewPrivs:", "1", "Seccomp:", "2"]  # fmt: skip
    assert "root" not in lines and "home" not in lines
    assert os.stat(os.path.join(workdir, "made")).st_uid == OUTER_UID
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    assert marker.encode() not in f.read()
            except OSError:
                pass
