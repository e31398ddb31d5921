"""The guarded MCP server: RoboZ's own guarded tools offered to any MCP host over stdio.

It offers ``run_file_command``, ``apply_patch`` and ``process_pdf`` under one
PermissionPolicy (read from a policy file by ``roboz mcp serve``) and, given a SafeScripts
helper socket, ``run_shell_script``. Each call runs the very tool chains an agent gets, so the
checks are the same: every path operand after globbing and symlink resolution, before anything
runs. "ask" verdicts become MCP elicitation requests when the client supports them; otherwise
they are refused, and the reply says why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Literal, cast

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp import types
from mcp.server.fastmcp import Context, FastMCP
from mcp.types import CallToolResult
from pydantic import BaseModel, Field, ValidationError

from roboz.models import Empty, Str
from roboz.runtime.events import Event, EventPipe
from roboz.runtime.io import use_user_io
from roboz.shed.files.report import FileCommandResult
from roboz.shed.sandbox import PermissionPolicy
from roboz.shed.skills import FilesystemContext, PdfContext, filesystem_skill, pdf_skill
from roboz.shed.tools._checked import REFUSAL
from roboz.tools import Tool

logger = logging.getLogger("roboz.mcp.serve")

INVALID_APPROVAL = (
    '(the MCP client\'s answer to the approval request was not {{"approve": true}} or '
    '{{"approve": false}} ({error}), so the access was refused)'
)
NO_ELICITATION = (
    "(this access needs the user's approval, but the MCP client does not support "
    "elicitation, so it was refused; allow or deny it in the policy file instead)"
)
TagName = Literal["CMD", "FLG", "ARG", "PTH", "CTL"]


class Approval(BaseModel):
    """What the host asks the user when a policy rule says "ask"."""

    approve: bool = Field(description="Allow this access?")


def _problems(error: ValueError) -> str:
    if isinstance(error, ValidationError):
        return "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'content'}: {e['msg']}" for e in error.errors()
        )
    return " ".join(str(error).split()) or type(error).__name__


class _ElicitingUserIO:
    """UserIO for the guard inside a worker thread: approvals become elicitation requests."""

    def __init__(self, ctx: Context[Any, Any, Any], supported: bool) -> None:
        self.ctx = ctx
        self.supported = supported
        self.refused_unasked = False
        self.invalid_answer = ""

    def request_input(self, prompt: str, *, timeout: float | None = None) -> Str | None:
        if not self.supported:
            self.refused_unasked = True
            return None
        try:
            result = anyio.from_thread.run(self.ctx.elicit, prompt, Approval)
        except ValueError as error:  # pydantic's ValidationError, or an accept without content
            # e.g. "accept" with content {}: an answer that approves nothing is a refusal.
            self.invalid_answer = INVALID_APPROVAL.format(error=_problems(error))
            return Str(value="no")
        approved = result.action == "accept" and bool(getattr(result.data, "approve", False))
        return Str(value="yes" if approved else "no")

    def notify(self, message: str) -> None:
        logger.info("%s", message)


def unencodable(tool: str, arguments: dict[str, Any]) -> str | None:
    """The reply refusing a call whose text cannot be encoded as UTF-8, or None.

    JSON lets a client send a lone surrogate (``"\\ud800"``); no tool can use it, and deep
    inside one it fails as UnicodeEncodeError. Refusing it here does not keep a client from a
    file whose name is not UTF-8: replies show such a name with ``\\xHH`` escapes, and a
    glob (``*`` in place of the escaped bytes) names it.
    """
    pending: list[tuple[str, Any]] = list(arguments.items())
    while pending:
        where, value = pending.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as error:
                return (
                    f"{tool}: invalid input: {where} contains text that cannot be encoded as "
                    f"UTF-8 ({error.reason} at character {error.start}); send valid Unicode "
                    "text only (a name shown with \\xHH escapes is named by a glob, * in place "
                    "of the escaped bytes); nothing ran"
                )
        elif isinstance(value, list | tuple):
            items = cast("Sequence[Any]", value)
            pending.extend((f"{where}[{index}]", item) for index, item in enumerate(items))
    return None


def reply(text: str, *, error: bool) -> CallToolResult:
    """A tool's answer; ``isError`` marks a refusal, so hosts can tell it from a result."""
    return CallToolResult(content=[types.TextContent(type="text", text=text)], isError=error)


def is_refusal(output: object) -> bool:
    """Whether the guarded work was refused or failed (denied, not started, internal error)."""
    if isinstance(output, FileCommandResult):
        refused = any(c.state in ("denied", "failed") for c in output.commands)
        return refused and output.exit_status != 0
    if getattr(output, "status", None) == "refused":  # a SafeScripts run the helper refused
        return True
    return isinstance(output, Str) and REFUSAL.match(output.value) is not None


def run_chain(tools: Sequence[Tool], value: Empty) -> Empty:
    """Run the head of a RoboZ chain and the chained tools its outputs fire, like an agent."""
    current = tools[0]
    output = current.run(value, [])
    while True:
        follower = next(
            (
                child
                for child in tools
                if current.name in child.chained_to
                and isinstance(output, child.input_type)
                and (child.chain_condition is None or child.chain_condition(output))
            ),
            None,
        )
        if follower is None:
            return output
        current, output = follower, follower.run(output, [])


def _log_decision(event: Event) -> None:
    verdict = getattr(event, "verdict", None)
    if verdict is not None:
        logger.info(
            "%s %s %s: %s%s",
            getattr(event, "tool", ""),
            getattr(event, "operation", ""),
            getattr(event, "path", ""),
            verdict,
            getattr(event, "reason", ""),
        )


def build_server(
    policy: PermissionPolicy, *, socket_path: str | None = None, name: str = "roboz"
) -> FastMCP:
    """The FastMCP server offering the guarded tools under ``policy``."""
    pipe = EventPipe([_log_decision])
    files = filesystem_skill(FilesystemContext(permissions=policy, pipe=pipe))
    pdf = pdf_skill(PdfContext(permissions=policy, pipe=pipe))
    tools = {item.name: item for item in [*files.tools, *pdf.tools]}

    def chain_of(head: str) -> list[Tool]:
        return [tools[head], *(t for t in tools.values() if head in t.chained_to)]

    file_command, patch, read_pdf = (
        chain_of("run_file_command"),
        chain_of("apply_patch"),
        chain_of("process_pdf"),
    )
    server = FastMCP(
        name,
        instructions=f"{files.instructions}\n\nPermission policy:\n{policy.rules_text()}",
        log_level="WARNING",
    )

    async def guarded(ctx: Context[Any, Any, Any], work: Callable[[], Empty]) -> CallToolResult:
        wanted = types.ClientCapabilities(elicitation=types.ElicitationCapability())
        user_io = _ElicitingUserIO(ctx, ctx.session.check_client_capability(wanted))

        def job() -> Empty:
            with use_user_io(user_io):
                return work()

        output = await anyio.to_thread.run_sync(job)
        text = output.value if isinstance(output, Str) else output.model_dump_json()
        if user_io.refused_unasked:
            text = f"{text}\n{NO_ELICITATION}"
        if user_io.invalid_answer:
            text = f"{text}\n{user_io.invalid_answer}"
        return reply(text, error=is_refusal(output))

    # Hints for hosts that show or gate tools by effect (they are hints, the policy decides).
    writes = types.ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False)
    reads = types.ToolAnnotations(readOnlyHint=True, openWorldHint=False)

    @server.tool(
        name="run_file_command", description=file_command[0].instruction, annotations=writes
    )
    async def run_file_command(
        value: list[tuple[str, TagName]],
        ctx: Context[Any, Any, Any],
    ) -> CallToolResult:
        refused = unencodable("run_file_command", {"value": value})
        if refused is not None:
            return reply(refused, error=True)
        try:
            command = file_command[0].input_type.model_validate({"value": value})
        except ValidationError as error:
            return reply(f"run_file_command: invalid input: {error}", error=True)
        return await guarded(ctx, lambda: run_chain(file_command, command))

    @server.tool(name="apply_patch", description=patch[0].instruction, annotations=writes)
    async def apply_patch(
        path: str,
        old_string: str,
        new_string: str,
        ctx: Context[Any, Any, Any],
        replace_all: bool = False,
    ) -> CallToolResult:
        arguments = {"path": path, "old_string": old_string, "new_string": new_string}
        refused = unencodable("apply_patch", arguments)
        if refused is not None:
            return reply(refused, error=True)
        request = patch[0].input_type.model_validate({**arguments, "replace_all": replace_all})
        return await guarded(ctx, lambda: run_chain(patch, request))

    @server.tool(name="process_pdf", description=read_pdf[0].instruction, annotations=reads)
    async def process_pdf(
        path: str,
        ctx: Context[Any, Any, Any],
        start_page: int = 1,
        end_page: int | None = None,
    ) -> CallToolResult:
        refused = unencodable("process_pdf", {"path": path})
        if refused is not None:
            return reply(refused, error=True)
        try:
            request = read_pdf[0].input_type.model_validate(
                {"path": path, "start_page": start_page, "end_page": end_page}
            )
        except ValidationError as error:
            return reply(f"process_pdf: invalid input: {error}", error=True)
        return await guarded(ctx, lambda: run_chain(read_pdf, request))

    if socket_path is not None:
        from roboz.shed.safe_scripts.tool import get_run_shell_script

        script_tool = get_run_shell_script(socket_path)

        @server.tool(
            name="run_shell_script", description=script_tool.instruction, annotations=writes
        )
        async def run_shell_script(
            ctx: Context[Any, Any, Any],
            script: str | None = None,
            args: list[str] | None = None,
        ) -> CallToolResult:
            arguments = {"script": script, "args": list(args or [])}
            refused = unencodable("run_shell_script", arguments)
            if refused is not None:
                return reply(refused, error=True)
            request = script_tool.input_type.model_validate(arguments)
            return await guarded(ctx, lambda: script_tool.run(request, []))

    return server


def serve(policy: PermissionPolicy, *, socket_path: str | None = None) -> None:
    """Serve the guarded tools on stdin/stdout until the host closes the connection."""
    build_server(policy, socket_path=socket_path).run("stdio")
