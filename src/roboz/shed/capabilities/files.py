"""Filesystem and Pdf: the guarded file skills, bound to their owner's permission policy.

Both read ``permissions`` (a PermissionPolicy) from the owning DeployableAgent, set with
``set_attributes(permissions=...)``, and emit permission decisions on the deployment's pipe,
so one policy guards every file tool of an agent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from roboz.deployment import Capability, RuntimeValue, SkillLabel, SkillLoading
from roboz.shed.dependency_health import ExecutableDependency
from roboz.shed.skills import FilesystemContext, PdfContext, filesystem_skill, pdf_skill

if TYPE_CHECKING:
    from roboz.dependencies import ExternalDependency
    from roboz.deployment import DeployableAgent
    from roboz.runtime.events import EventPipe

PERMISSIONS = "permissions"
# Labels are immutable, so one default instance can be shared by every capability.
FILESYSTEM_LABEL = SkillLabel("filesystem", loading=SkillLoading.AUTOMATIC, selectable=True)
PDF_LABEL = SkillLabel("pdf", loading=SkillLoading.AUTOMATIC, selectable=True)
# The programs run_file_command runs natively (the other commands are implemented in Python).
FILE_COMMAND_PROGRAMS = ("grep", "rg", "ls", "diff", "find", "gio")


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

    required_attributes = (PERMISSIONS,)

    def __init__(self, *, label: SkillLabel = FILESYSTEM_LABEL) -> None:
        super().__init__(label=_skill_label("Filesystem", label))

    def build(self, agent: DeployableAgent, pipe: EventPipe) -> tuple[RuntimeValue, ...]:
        context = FilesystemContext(permissions=agent.attributes[PERMISSIONS], pipe=pipe)
        return (filesystem_skill(context),)

    def external_dependencies(self) -> tuple[ExternalDependency, ...]:
        return tuple(
            ExecutableDependency(program, purpose=f"run_file_command {program}")
            for program in FILE_COMMAND_PROGRAMS
        )


class Pdf(Capability):
    """The guarded process_pdf reader as the pdf skill; loaded at start unless labelled
    otherwise (``Pdf(label=SkillLabel("pdf"))`` offers it on demand)."""

    required_attributes = (PERMISSIONS,)

    def __init__(self, *, label: SkillLabel = PDF_LABEL) -> None:
        super().__init__(label=_skill_label("Pdf", label))

    def build(self, agent: DeployableAgent, pipe: EventPipe) -> tuple[RuntimeValue, ...]:
        context = PdfContext(permissions=agent.attributes[PERMISSIONS], pipe=pipe)
        return (pdf_skill(context),)
