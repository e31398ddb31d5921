"""RoboZ: typed LLM agents whose tools chain conditionally. Chain tools. Skip calls."""

# The public names load on first use (PEP 562), so that `import roboz` and the `roboz` command
# do not pay for pydantic models, asyncio and the agent loop before they need them; type
# checkers see the plain imports below.
from typing import TYPE_CHECKING

from roboz._lazy import lazy_exports

if TYPE_CHECKING:
    from roboz.agent import Agent, AgentMode
    from roboz.tools import Skill, factory, tool

__all__ = ["Agent", "AgentMode", "Skill", "factory", "tool"]
__version__ = "0.12.1a1"

_HOMES = {
    "Agent": "roboz.agent",
    "AgentMode": "roboz.agent",
    "Skill": "roboz.tools",
    "factory": "roboz.tools",
    "tool": "roboz.tools",
}


__getattr__ = lazy_exports(__name__, _HOMES)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
