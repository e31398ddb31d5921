"""Ready agent definitions (DeployableAgent recipes): the orchestrator, the Librarian that
keeps its memory, and a document reader.

Applications own endpoints, policies, sinks and lifecycle; these only assemble capabilities.
"""

from roboz.shed.agents.document_reader import document_reader
from roboz.shed.agents.librarian import StoredAgent, librarian
from roboz.shed.agents.orchestrator import orchestrator

__all__ = ["StoredAgent", "document_reader", "librarian", "orchestrator"]
