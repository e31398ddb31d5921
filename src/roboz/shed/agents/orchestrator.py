"""The orchestrator: a foreground agent working in a Sandbox, with the Librarian beside it."""

from __future__ import annotations

import os
from collections.abc import Sequence

from roboz.agent import Agent, AgentMode
from roboz.agent.nested import agent_tool
from roboz.deployment import Capability, DeployableAgent, SkillLabel, ToolLabel
from roboz.deployment.deployable import InitialMessage
from roboz.llm import EndpointLike
from roboz.shed.agents.librarian import StoredAgent, librarian
from roboz.shed.capabilities import Filesystem, Pdf, SafeScripts
from roboz.shed.capabilities.memory import ProjectMemory
from roboz.shed.sandbox import Sandbox
from roboz.tools import stop

ORCHESTRATOR_PROMPT = """\
You carry out the user's tasks on this machine with the tools you have. Work in small,
checked steps: read before you change, and say what you changed. File tools only reach what
the permission policy allows; a denied command did not run, so do not retry it unchanged.
Scripts run isolated by the SafeScripts helper; list them before running one. A message
starting with [Project memory] is what earlier runs learned: follow its standing
instructions. When the task is done, or cannot be done, stop with a short report."""


def orchestrator(
    sandbox: Sandbox,
    *,
    agent_endpoint: EndpointLike | None,
    nested_agents: Sequence[Agent | DeployableAgent] = (),
    background_agents: Sequence[DeployableAgent] = (),
    initial_messages: Sequence[InitialMessage] = (),
    socket_path: str | os.PathLike[str] | None = None,
    librarian_endpoint: EndpointLike | None = None,
    name: str = "orchestrator",
) -> StoredAgent:
    """A fresh orchestrator for ``sandbox``'s scoped project.

    Filesystem and Pdf are guarded by ``sandbox.permissions()`` (``sandbox`` is the
    definition's sandbox); run_shell_script is declared when ``socket_path`` names a helper;
    each nested agent is a tool named after it. Every run is persisted in the project's run
    store and starts with the latest project memory; the Librarian (summarizing with
    ``librarian_endpoint``, default ``agent_endpoint``) and ``background_agents`` run beside
    each run. ``stop`` is fixed; everything else can be deselected.
    """
    definition = StoredAgent(
        name,
        ORCHESTRATOR_PROMPT,
        description="Carries out tasks with guarded files, PDFs and sandboxed scripts.",
        mode=AgentMode.STEERABLE,
        agent_endpoint=agent_endpoint,
        initial_messages=initial_messages,
        sandbox=sandbox,
    )
    keeper = librarian(
        sandbox,
        (name,),
        agent_endpoint=librarian_endpoint or agent_endpoint,
        event_pipe=definition.event_pipe,
    )
    definition.add_capabilities(
        ProjectMemory(sandbox, background_agents=(keeper, *background_agents)),
        Filesystem(),
        Pdf(label=SkillLabel("pdf", selectable=True)),
        *(
            Capability(label=ToolLabel(child.name), value=agent_tool(child))
            for child in nested_agents
        ),
        Capability(label=ToolLabel("stop", selectable=False), value=stop),
    )
    if socket_path is not None:
        definition.add_capabilities(SafeScripts(socket_path=socket_path))
    return definition
