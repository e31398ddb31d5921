"""Every setting of the caller's client holds for every run the tool makes, blocking or
async: the tool's two clients are made from one ClientSettings value, so none is dropped
between them (reuse_connections was, for the async runs)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from roboz.shed.models import Operation, PermissionRule
from roboz.shed.safe_scripts import SafeScriptsClient
from roboz.shed.safe_scripts.tool import (
    RunShellScriptInput,
    arun_shell_script,
    get_run_shell_script,
    shell_script_context,
)
from roboz.shed.sandbox import PermissionPolicy
from tests.shed.safe_scripts.conftest import Helper

GREET = RunShellScriptInput(script="greet.sh", args=["you"])


@pytest.mark.parametrize("reuse", [True, False])
@pytest.mark.parametrize("narrowed", [False, True])
def test_the_tool_keeps_connections_only_when_the_client_does(
    helper: Helper, tmp_path: Path, reuse: bool, narrowed: bool
) -> None:
    client = SafeScriptsClient(
        helper.socket_path, timeout=7.5, max_capture_bytes=4321, reuse_connections=reuse
    )
    policy = None
    if narrowed:
        rule = PermissionRule(pattern="**", operations={Operation.READ})
        policy = PermissionPolicy(base=helper.base / "work", allow=(rule,))
    ctx = shell_script_context(client, file_policy=policy)
    expected = client.settings
    if policy is not None:
        expected = replace(expected, file_policy=policy.file_policy)
    assert ctx.client.settings == expected and ctx.aclient.settings == expected

    async def two_async_runs() -> list[int]:
        kept = []
        for _ in range(2):
            outcome = await arun_shell_script(GREET, [], ctx)
            assert "hello you" in outcome.value, outcome
            kept.append(len(ctx.aclient.idle._conns))
        ctx.aclient.close()  # on its loop
        return kept

    assert asyncio.run(two_async_runs()) == ([1, 1] if reuse else [0, 0])
    tool = get_run_shell_script(ctx.client)
    for _ in range(2):
        assert "hello you" in tool.run(GREET, []).value
        assert len(ctx.client.idle._conns) == (1 if reuse else 0)
    ctx.client.close()
