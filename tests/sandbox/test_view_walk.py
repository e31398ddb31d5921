"""A file view whose walk is long must not hold up anybody else's run.

A rule on a bare name (``**/.env``) makes the helper look into every directory of the tree
when a run starts, and a run can make the tree as large as its disk allows. The walk ran on
the helper's event loop, so while it lasted nothing else was served: no other client's run
started, streamed or ended, no egress proxy moved a byte. It runs in a worker thread now.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from roboz_helper.file_policy import FilePolicy, FileRule
from roboz_helper.sandbox import run_in_sandbox

from tests.sandbox.conftest import RUN_GID, RUN_UID, Sandbox


def _big_tree(root: Path, dirs: int = 200, files: int = 200) -> None:
    for d in range(dirs):
        sub = root / f"pkg{d}"
        sub.mkdir()
        for f in range(files):
            os.close(os.open(sub / f"m{f}.py", os.O_CREAT | os.O_WRONLY, 0o644))


def test_another_run_is_served_while_a_view_is_walked(sandbox: Sandbox, tmp_path: Path) -> None:
    ws = sandbox.workspace
    _big_tree(ws)
    policy = FilePolicy(
        base=str(ws), allow=(FileRule(pattern="**"),), deny=(FileRule(pattern="**/.env"),)
    )
    other = tmp_path / "other"
    other.mkdir()
    os.chown(other, RUN_UID, RUN_GID)
    slow = sandbox.spec(argv=["/bin/echo", "slow"], file_policies=(policy,))
    fast = sandbox.spec(argv=["/bin/echo", "fast"], workdir=str(other))
    order: list[str] = []

    def record(name: str):  # type: ignore[no-untyped-def]
        async def on_output(stream: int, data: bytes) -> None:
            order.append(name)

        return on_output

    async def main() -> None:
        walking = asyncio.create_task(run_in_sandbox(slow, record("slow")))
        await asyncio.sleep(0)  # the slow run is planning its view now
        await asyncio.gather(walking, run_in_sandbox(fast, record("fast")))

    asyncio.run(main())
    # The walk of 40,000 files takes a third of a second or more; the other run needs a
    # few milliseconds of the loop.
    assert order == ["fast", "slow"]
