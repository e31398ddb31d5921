"""Filesystem and Pdf: the guarded file skills, bound to their owner's sandbox.

Both derive their PermissionPolicy from the owning DeployableAgent's ``sandbox`` (a Sandbox
layout's ``permissions()``, or the PermissionPolicy given as the sandbox) and emit permission
decisions on the deployment's pipe, so one policy guards every file tool of an agent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from roboz.deployment import (
    Capability,
    MissingAttributesError,
    RuntimeValue,
    SkillLabel,
    SkillLoading,
)
from roboz.shed.dependency_health import ExecutableDependency
from roboz.shed.sandbox import PermissionPolicy
from roboz.shed.skills import FilesystemContext, PdfContext, filesystem_skill, pdf_skill

if TYPE_CHECKING:
    from roboz.dependencies import ExternalDependency
    from roboz.deployment import DeployableAgent
    from roboz.runtime.events import EventPipe

# Labels are immutable, so one default instance can be shared by every capability.
FILESYSTEM_LABEL = SkillLabel("filesystem", loading=SkillLoading.AUTOMATIC, selectable=True)
PDF_LABEL = SkillLabel("pdf", loading=SkillLoading.AUTOMATIC, selectable=True)
# The programs run_file_command runs natively (the other commands are implemented in Python).
FILE_COMMAND_PROGRAMS = ("grep", "rg", "ls", "diff", "find", "gio")


def owner_policy(agent: DeployableAgent) -> PermissionPolicy:
    """The policy the owner's sandbox gives its guarded tools."""
    sandbox = agent.sandbox
    if sandbox is None:  # build() checks requires_sandbox first; this guards direct calls
        raise MissingAttributesError(
            f"agent {agent.name!r} has no sandbox: set DeployableAgent(sandbox=...) or "
            "agent.sandbox to a Sandbox layout or a PermissionPolicy"
        )
    return sandbox if isinstance(sandbox, PermissionPolicy) else sandbox.permissions()


def _skill_label(owner: str, label: object) -> SkillLabel:
    # These capabilities build a whole skill; a ToolLabel would split instructions from tools.
    if not isinstance(label, SkillLabel):
        raise TypeError(f"{owner} builds a skill, so its label must be a SkillLabel, got {label!r}")
    return label


class Filesystem(Capability):
    """The complete filesystem skill: run_file_command, apply_patch and their instructions.

    Loaded at start by default; ``Filesystem(label=SkillLabel("filesystem"))`` offers it on
    demand, and loading it brings the instructions and both tool chains at once.
    """

    requires_sandbox = True

    def __init__(self, *, label: SkillLabel = FILESYSTEM_LABEL) -> None:
        super().__init__(label=_skill_label("Filesystem", label))

    def build(self, agent: DeployableAgent, pipe: EventPipe) -> tuple[RuntimeValue, ...]:
        context = FilesystemContext(permissions=owner_policy(agent), pipe=pipe)
        return (filesystem_skill(context),)

    def external_dependencies(self) -> tuple[ExternalDependency, ...]:
        return tuple(
            ExecutableDependency(program, purpose=f"run_file_command {program}")
            for program in FILE_COMMAND_PROGRAMS
        )


class Pdf(Capability):
    """The guarded process_pdf reader as the pdf skill; loaded at start unless labelled
    otherwise (``Pdf(label=SkillLabel("pdf"))`` offers it on demand)."""

    requires_sandbox = True

    def __init__(self, *, label: SkillLabel = PDF_LABEL) -> None:
        super().__init__(label=_skill_label("Pdf", label))

    def build(self, agent: DeployableAgent, pipe: EventPipe) -> tuple[RuntimeValue, ...]:
        context = PdfContext(permissions=owner_policy(agent), pipe=pipe)
        return (pdf_skill(context),)
