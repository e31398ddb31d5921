"""The document reader: reads files and PDFs and answers from them, citing where it read."""

from __future__ import annotations

from roboz.agent import AgentMode
from roboz.deployment import Capability, DeployableAgent, ToolLabel
from roboz.llm import EndpointLike
from roboz.shed.capabilities import Filesystem, Pdf
from roboz.shed.sandbox import PermissionPolicy
from roboz.tools import stop

DOCUMENT_READER_PROMPT = """\
You are a document reader. Answer questions from the files and PDFs you can read: find the
relevant documents (ls, find, rg), read only the parts you need (head, cat, process_pdf with a
page range), and answer with the file names and pages you used. You do not change files. If
the documents do not answer the question, say so. Stop with your answer."""


def document_reader(
    *,
    permissions: PermissionPolicy | None = None,
    agent_endpoint: EndpointLike | None = None,
    name: str = "document_reader",
) -> DeployableAgent:
    """A fresh document reader definition; give it a read-only ``permissions`` policy (its
    sandbox; it can also be set later as ``definition.sandbox``).

    The prompt asks it not to write, but only the policy enforces that.
    """
    definition = DeployableAgent(
        name,
        DOCUMENT_READER_PROMPT,
        description="Reads files and PDFs and answers with citations.",
        mode=AgentMode.AUTONOMOUS,
        agent_endpoint=agent_endpoint,
        sandbox=permissions,
        capabilities=(
            Filesystem(),
            Pdf(),
            Capability(label=ToolLabel("stop", selectable=False), value=stop),
        ),
    )
    return definition
