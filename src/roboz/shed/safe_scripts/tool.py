"""The ``run_shell_script`` agent tool: list or run the scripts a SafeScripts helper allows.

The helper decides what may run and isolates every run; this tool only turns the result into
something an LLM can act on: status, exit status, which limit was hit, and output capped to a
size the conversation can afford (head and tail kept, since errors usually come last).
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from pydantic import BaseModel, Field
from roboz_helper.file_policy import FilePolicy, rules_text

from roboz.agent.drivers import drive
from roboz.models import Empty, Message, Str
from roboz.runtime.events import ToolOutput, current_pipe
from roboz.shed.guard._policy import PermissionPolicy
from roboz.shed.safe_scripts.aio import AsyncSafeScriptsClient
from roboz.shed.safe_scripts.client import (
    OutputCallback,
    SafeScriptsClient,
    SafeScriptsError,
    ScriptInfo,
    ShellScriptResult,
)
from roboz.shed.safe_scripts.network import RunNetwork
from roboz.tools import Tool, factory

_TOOL_NAME = "run_shell_script"
DEFAULT_MAX_OUTPUT_CHARS = 8000
DEFAULT_MAX_LIVE_CHARS = 64_000
"""Characters of a run's output emitted as ToolOutput events while it runs."""


class RunShellScriptInput(Empty):
    script: str | None = Field(
        default=None,
        description="Script path relative to the scripts directory; omit to list the scripts.",
    )
    args: list[str] = Field(default_factory=list, description="Arguments passed to the script.")


class ShellScriptListing(Str):
    """The scripts this agent may run: ``value`` lists names and descriptions."""

    scripts: list[str]


class RefusedConnection(BaseModel):
    """A destination the helper's egress proxy refused during a run (attempts counted)."""

    host: str
    port: int
    reason: str  # not-allowed, port, ip-literal, address, sni, byte-limit, ...
    by_policy: bool  # refused by the allowlist: asking for the host may help
    attempts: int = 1
    message: str  # "network: git.evil.example:443 is not allowed by policy 'dev'"


class ShellScriptOutcome(Str):
    """One run: ``value`` is the readable report with capped stdout and stderr."""

    script: str
    status: str
    exit_status: int | None = None
    limit: str | None = None
    output_truncated: bool = False
    # A run with a network allowlist: what its proxy refused.
    network_refused: list[RefusedConnection] = Field(default_factory=list[RefusedConnection])


@dataclass(frozen=True)
class ShellScriptContext:
    """What run_shell_script needs: a client of each kind for the same helper, and limits."""

    client: SafeScriptsClient
    aclient: AsyncSafeScriptsClient
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS
    max_live_chars: int = DEFAULT_MAX_LIVE_CHARS


class _LiveOutput:
    """Emits a run's output as ToolOutput events on the run's pipe while it arrives, at most
    ``limit`` characters in all (a UI wants to see progress, not a second copy of a log)."""

    def __init__(self, limit: int) -> None:
        self.pipe = current_pipe()
        self.left = limit
        self.decoders = {
            stream: codecs.getincrementaldecoder("utf-8")("replace")
            for stream in ("stdout", "stderr")
        }

    def __call__(self, stream: str, data: bytes) -> None:
        if self.pipe is None or self.left <= 0:
            return
        text = self.decoders[stream].decode(data)
        if not text:
            return
        truncated = len(text) >= self.left
        text = text[: self.left]
        self.left -= len(text)
        self.pipe.emit(ToolOutput(tool=_TOOL_NAME, stream=stream, text=text, truncated=truncated))


class _ScriptCalls(Protocol):
    """The two calls the tool makes, as the async client has them."""

    async def list_scripts(self) -> list[ScriptInfo]: ...

    async def run_script(
        self, path: str, args: Sequence[str] = (), on_output: OutputCallback | None = None
    ) -> ShellScriptResult: ...


class _BlockingCalls:
    """The blocking client behind the async client's interface. Its coroutines never
    suspend, so a sync run drives the tool's one body with ``drive``: no event loop, no
    thread, just the blocking calls."""

    def __init__(self, client: SafeScriptsClient) -> None:
        self._client = client

    async def list_scripts(self) -> list[ScriptInfo]:
        return self._client.list_scripts()

    async def run_script(
        self, path: str, args: Sequence[str] = (), on_output: OutputCallback | None = None
    ) -> ShellScriptResult:
        return self._client.run_script(path, args, on_output)


async def _shell_script(
    input: RunShellScriptInput, ctx: ShellScriptContext, calls: _ScriptCalls
) -> ShellScriptListing | ShellScriptOutcome:
    """What the tool does, written once for both clients."""
    try:
        if input.script is None:
            return _listing(await calls.list_scripts())
        live = _LiveOutput(ctx.max_live_chars)
        result = await calls.run_script(input.script, input.args, on_output=live)
    except SafeScriptsError as error:
        return _helper_error(input.script, error)
    return _outcome(input.script, result, ctx.max_output_chars)


@factory(name=_TOOL_NAME)
def _run_shell_script(
    input: RunShellScriptInput, messages: list[Message], ctx: ShellScriptContext
) -> ShellScriptListing | ShellScriptOutcome:
    """Run one of the prepared shell scripts on the host, in an isolated sandbox.

    Call without `script` first to list the available scripts and what they do. Then call with
    `script` (a path exactly as listed) and `args` (a list of strings, one per argument). The
    reply gives the status (success, failed, timeout, output_limit, killed, refused), the exit
    status, which limit stopped the run if any, and the script's stdout and stderr (long output
    is shortened in the middle). Scripts run isolated, with only the network access and
    writable paths their policy grants; you cannot run arbitrary commands with this tool.
    """
    return drive(_shell_script(input, ctx, _BlockingCalls(ctx.client)))


@_run_shell_script.async_body
async def arun_shell_script(
    input: RunShellScriptInput, messages: list[Message], ctx: ShellScriptContext
) -> ShellScriptListing | ShellScriptOutcome:
    """run_shell_script for async runs (``ainvoke`` picks it): the same body on the asyncio
    client, so waiting for a script blocks no thread (cancelling the awaiting task ends the
    run)."""
    return await _shell_script(input, ctx, ctx.aclient)


def shell_script_context(
    client_or_socket_path: SafeScriptsClient | str | os.PathLike[str],
    *,
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    max_live_chars: int = DEFAULT_MAX_LIVE_CHARS,
    file_policy: PermissionPolicy | None = None,
) -> ShellScriptContext:
    """The context of run_shell_script for the helper at ``client_or_socket_path``; with
    ``file_policy`` (the agent's) every run is narrowed by it, also through a given client."""
    client = (
        client_or_socket_path
        if isinstance(client_or_socket_path, SafeScriptsClient)
        else SafeScriptsClient(client_or_socket_path)
    )
    # Both clients from one ClientSettings value: every setting of the caller's client
    # (reuse_connections too) holds for the async runs as for the blocking ones.
    settings = client.settings
    if file_policy is not None:
        narrowed = _narrowest(settings.file_policy, file_policy)
        settings = replace(settings, file_policy=narrowed)
        client = SafeScriptsClient.from_settings(settings)
    aclient = AsyncSafeScriptsClient.from_settings(settings)
    return ShellScriptContext(client, aclient, max_output_chars, max_live_chars)


def get_run_shell_script(
    client_or_socket_path: SafeScriptsClient | str | os.PathLike[str],
    *,
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    max_live_chars: int = DEFAULT_MAX_LIVE_CHARS,
    file_policy: PermissionPolicy | None = None,
) -> Tool:
    """The run_shell_script tool talking to the helper through ``client_or_socket_path``.

    The result gives the LLM at most ``max_output_chars`` of each stream; while a script runs,
    its first ``max_live_chars`` characters of output are emitted as ToolOutput events. With
    ``file_policy`` (the agent's guarded-files policy) what it denies is absent in every run.
    """
    context = shell_script_context(
        client_or_socket_path,
        max_output_chars=max_output_chars,
        max_live_chars=max_live_chars,
        file_policy=file_policy,
    )
    built = _run_shell_script(context)
    narrowing = context.client.file_policy
    if narrowing is None:
        return built
    # The composed view, where the LLM and show_agent_info both read it: the file policy the
    # guarded file tools enforce is the one every run is narrowed by.
    return replace(built, instruction=built.instruction + _policy_note(narrowing))


def _policy_note(policy: FilePolicy) -> str:
    rules = rules_text(policy).replace("\n", "\n    ")
    return (
        "\n\nEvery run sees the files through your file policy (the same one your file "
        "tools obey, narrowed further by the helper's own): what it denies is absent inside "
        "the run, what it does not let you write is read-only.\n    " + rules
    )


def _narrowest(current: FilePolicy | None, new: PermissionPolicy) -> FilePolicy:
    """A client already narrowed by another policy cannot be narrowed by two on the wire;
    refuse rather than drop either (the caller composes them into one PermissionPolicy)."""
    if current is not None and current != new.file_policy:
        raise ValueError(
            "the client already carries a different file_policy; pass one policy "
            "(the agent's), not two"
        )
    return new.file_policy


def _helper_error(script: str | None, error: SafeScriptsError) -> ShellScriptOutcome:
    # The helper being unreachable is something the agent should report, not a crash.
    return ShellScriptOutcome(
        value=f"script {script or '(listing)'}: helper error: {error}",
        script=script or "",
        status="helper_error",
    )


def _listing(scripts: list[ScriptInfo]) -> ShellScriptListing:
    if not scripts:
        text = "No scripts are available to this agent."
    else:
        lines = [
            f"- {s.name}: {s.description}" if s.description else f"- {s.name}" for s in scripts
        ]
        text = "Available scripts:\n" + "\n".join(lines)
    return ShellScriptListing(value=text, scripts=[s.name for s in scripts])


def _outcome(script: str, result: ShellScriptResult, max_chars: int) -> ShellScriptOutcome:
    stdout, cut_out = cap_text(result.stdout, max_chars)
    stderr, cut_err = cap_text(result.stderr, max_chars)
    truncated = result.output_truncated or cut_out or cut_err
    lines = [f"script {script}: {result.status}, exit status {_exit(result)}"]
    if result.limit is not None:
        lines.append(f"limit hit: {result.limit}")
    if result.diagnostic:
        lines.append(f"diagnostic: {result.diagnostic}")
    if truncated:
        lines.append("output was truncated")
    refused = _refused(result.network)
    if result.network is not None and result.network.refused:
        lines += result.network.summary()
        if any(r.by_policy for r in refused):
            lines.append("(a host the run needs can be added to the helper's allowlist)")
    lines += ["stdout:", stdout or "(empty)", "stderr:", stderr or "(empty)"]
    return ShellScriptOutcome(
        value="\n".join(lines),
        script=script,
        status=result.status,
        exit_status=result.exit_status,
        limit=result.limit,
        output_truncated=truncated,
        network_refused=refused,
    )


def _refused(network: RunNetwork | None) -> list[RefusedConnection]:
    if network is None:
        return []
    return [
        RefusedConnection(
            host=r.host,
            port=r.port,
            reason=r.reason,
            by_policy=r.by_policy,
            attempts=r.count,
            message=r.message,
        )
        for r in network.refusals
    ]


def _exit(result: ShellScriptResult) -> str:
    if result.signal is not None:
        return f"{result.exit_status} (signal {result.signal})"
    return "none" if result.exit_status is None else str(result.exit_status)


def cap_text(text: str, max_chars: int) -> tuple[str, bool]:
    """``text`` within ``max_chars``: head and tail kept, the middle replaced by a marker."""
    if len(text) <= max_chars:
        return text, False
    marker = f"\n[... {len(text) - max_chars} characters omitted ...]\n"
    head = max_chars // 2
    tail = max_chars - head
    return text[:head] + marker + text[len(text) - tail :], True
