"""Ready agent definitions (DeployableAgent recipes): the orchestrator and the Librarian.

Applications own endpoints, policies, sinks and lifecycle; these only assemble capabilities.
"""

from roboz.shed.agents.librarian import librarian
from roboz.shed.agents.orchestrator import orchestrator

__all__ = ["librarian", "orchestrator"]
