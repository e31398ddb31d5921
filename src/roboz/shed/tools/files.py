"""The run_file_command chain: validate the tokens, then check and run each command."""

from __future__ import annotations

from pydantic import Field

from roboz.models import Message, Str
from roboz.shed.files.engine import FileCommandEngine, parse
from roboz.shed.files.report import FileCommandResult
from roboz.shed.files.tokens import FileCommandInput, Token
from roboz.shed.tools._checked import Accepted, executor
from roboz.shed.tools.context import FilesystemContext
from roboz.tools import Tool, factory


class FileCommandPlan(Accepted):
    """A syntactically valid command sequence on its way to the guarded executor."""

    tokens: list[Token] = Field(default_factory=list[Token], exclude=True)


@factory
def run_file_command(
    input: FileCommandInput, messages: list[Message], ctx: FilesystemContext
) -> FileCommandPlan | FileCommandResult:
    """Run file commands without a shell, each checked against the permission policy first.

    Give one ordered array `value` of [value, tag] pairs: CMD command, FLG option, ARG value,
    PTH path, CTL control operator (&&, ||, ;, |). Example: create a note and count its lines:
    [["mkdir","CMD"],["-p","FLG"],["notes","PTH"],["&&","CTL"],["tee","CMD"],
    ["line 1\\nline 2\\n","ARG"],["notes/today.txt","PTH"],["&&","CTL"],["wc","CMD"],
    ["-l","FLG"],["notes/today.txt","PTH"]]. The reply reports, per command, whether it ran,
    was denied (and why) or was skipped, its exit status and its output. See the filesystem
    skill's instructions for the commands and options allowed.
    """
    failure = parse(input.value, options=True)
    if isinstance(failure, FileCommandResult):
        return failure
    return FileCommandPlan(
        value="command syntax valid; checking permissions and running", tokens=list(input.value)
    )


@executor(run_file_command, FileCommandPlan)
def execute_file_command(
    input: Str, messages: list[Message], ctx: FilesystemContext
) -> FileCommandResult:
    """Check every path of each reached command against the policy and run it (passive)."""
    assert isinstance(input, FileCommandPlan)
    engine = FileCommandEngine(
        ctx.permissions, pipe=ctx.pipe, limits=ctx.limits, on_checked=ctx.on_checked
    )
    return engine.run(input.tokens)


def get_run_file_command(ctx: FilesystemContext) -> list[Tool]:
    """The guarded run_file_command chain for ``ctx``: [run_file_command, its executor]."""
    return [run_file_command(ctx), execute_file_command(ctx)]
