"""The apply_patch chain: validate the request, then check permissions and write atomically."""

from __future__ import annotations

from pydantic import Field

from roboz.models import Empty, Message, Str
from roboz.shed.patch.engine import PatchError, path_problem
from roboz.shed.patch.engine import apply_patch as apply_literal_patch
from roboz.shed.tools._checked import Accepted, Refused, executor, run_guarded
from roboz.shed.tools.context import FilesystemContext
from roboz.tools import Tool, factory


class PatchInput(Empty):
    path: str = Field(..., description="File to change or create (relative to the base).")
    old_string: str = Field(
        ..., description="Exact text to replace; empty to write the whole file (or create it)."
    )
    new_string: str = Field(..., description="Replacement text.")
    replace_all: bool = Field(False, description="Replace every occurrence of old_string.")


class PatchRequest(Accepted):
    """A well-formed patch on its way to the guarded writer."""

    request: PatchInput | None = Field(default=None, exclude=True)


class PatchResult(Str):
    """What apply_patch did, or why it changed nothing."""

    ok: bool = Field(default=True, exclude=True)


def _bad_text(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"{error.reason} at position {error.start}"
    return None


@factory
def apply_patch(
    input: PatchInput, messages: list[Message], ctx: FilesystemContext
) -> PatchRequest | PatchResult:
    """Replace the literal text old_string with new_string in one file.

    old_string must match exactly once (include enough surrounding lines), unless replace_all
    is true. An empty old_string writes new_string as the whole file (creating it and missing
    parent directories). Everything outside the replaced text stays byte-identical; the write
    is atomic. Needs READ and CREATE permission on the file.
    """
    for name in ("old_string", "new_string"):
        problem = _bad_text(getattr(input, name))
        if problem:
            return PatchResult(
                value=f"apply_patch {input.path}: {name} is not valid text ({problem}); "
                "nothing was changed",
                ok=False,
            )
    problem = path_problem(input.path)
    if problem is not None:
        return PatchResult(value=f"apply_patch: {problem}; nothing was changed", ok=False)
    return PatchRequest(value=f"patch for {input.path} accepted", request=input)


@executor(apply_patch, PatchRequest)
def write_patch(input: Str, messages: list[Message], ctx: FilesystemContext) -> PatchResult:
    """Check permissions and apply the accepted patch atomically (passive)."""
    assert isinstance(input, PatchRequest) and input.request is not None
    request = input.request
    outcome = run_guarded(
        "apply_patch",
        request.path,
        lambda: apply_literal_patch(
            ctx.permissions,
            request.path,
            request.old_string,
            request.new_string,
            replace_all=request.replace_all,
            pipe=ctx.pipe,
        ),
        expected=(PatchError,),
        unchanged="; nothing was changed",
    )
    if isinstance(outcome, Refused):
        return PatchResult(value=outcome.text, ok=False)
    return PatchResult(value=outcome.describe())


def get_apply_patch(ctx: FilesystemContext) -> list[Tool]:
    """The guarded apply_patch chain for ``ctx``: [apply_patch, its writer]."""
    return [apply_patch(ctx), write_patch(ctx)]
