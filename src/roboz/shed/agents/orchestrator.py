"""The orchestrator: a general host agent with files, PDFs and (optionally) SafeScripts."""

from __future__ import annotations

import os

from roboz.agent import AgentMode
from roboz.deployment import Capability, DeployableAgent, SkillLabel, ToolLabel
from roboz.llm import EndpointLike
from roboz.shed.capabilities import Filesystem, Pdf, SafeScripts
from roboz.shed.sandbox import PermissionPolicy
from roboz.tools import stop

ORCHESTRATOR_PROMPT = """\
You carry out the user's tasks on this machine with the tools you have. Work in small,
checked steps: read before you change, and say what you changed. File tools only reach what
the permission policy allows; a denied command did not run, so do not retry it unchanged.
Scripts run isolated by the SafeScripts helper; list them before running one. When the task
is done, or cannot be done, stop with a short report."""


def orchestrator(
    *,
    permissions: PermissionPolicy | None = None,
    socket_path: str | os.PathLike[str] | None = None,
    agent_endpoint: EndpointLike | None = None,
    name: str = "orchestrator",
) -> DeployableAgent:
    """A fresh orchestrator definition.

    Filesystem loads at start, the pdf skill is offered on demand, and run_shell_script is
    declared when ``socket_path`` names a helper. ``stop`` is fixed; everything else can be
    deselected. ``permissions`` can also be set later with ``set_attributes``.
    """
    definition = DeployableAgent(
        name,
        ORCHESTRATOR_PROMPT,
        description="Carries out tasks with guarded files, PDFs and sandboxed scripts.",
        mode=AgentMode.STEERABLE,
        agent_endpoint=agent_endpoint,
        capabilities=(
            Filesystem(),
            Pdf(label=SkillLabel("pdf", selectable=True)),
            Capability(label=ToolLabel("stop", selectable=False), value=stop),
        ),
    )
    if socket_path is not None:
        definition.add_capabilities(SafeScripts(socket_path=socket_path))
    if permissions is not None:
        definition.set_attributes(permissions=permissions)
    return definition
