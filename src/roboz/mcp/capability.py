"""MCPTools: an MCP server's tools as a capability of a DeployableAgent.

With a ToolLabel (the default, named after the server) the tools are offered as they are;
with a SkillLabel they travel as a skill whose instructions are the server's own
``instructions`` (or a line naming the server).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from roboz.deployment import Capability, RuntimeValue, SkillLabel, ToolLabel
from roboz.mcp.client import MCPServer
from roboz.mcp.permissions import Rules, check_rules
from roboz.tools import Skill

if TYPE_CHECKING:
    from roboz.deployment import DeployableAgent
    from roboz.runtime.events import EventPipe


class MCPTools(Capability):
    """The tools of ``server`` (filtered by ``include``/``exclude``, guarded by ``rules``)."""

    def __init__(
        self,
        server: MCPServer,
        *,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        rules: Rules | None = None,
        prefix: str = "",
        label: ToolLabel | SkillLabel | None = None,
        instructions: str | None = None,
    ) -> None:
        super().__init__(label=label or ToolLabel(_label_name(server.name)))
        self.server = server
        self.include = None if include is None else tuple(include)
        self.exclude = tuple(exclude)
        self.rules = check_rules(rules)  # a bad rule fails at definition, not at build
        self.prefix = prefix
        self.instructions = instructions

    def build(self, agent: DeployableAgent, pipe: EventPipe) -> tuple[RuntimeValue, ...]:
        tools = self.server.tools(
            include=self.include, exclude=self.exclude, rules=self.rules, prefix=self.prefix
        )
        if not tools:
            raise ValueError(f"{self.describe()}: the server offers no tool to include")
        if isinstance(self.label, SkillLabel):
            text = self.instructions or f"Tools of the MCP server {self.server.name!r}."
            return (
                Skill(
                    name=self.label.name,
                    description=f"tools of the MCP server {self.server.name!r}",
                    instructions=text,
                    tools=tools,
                ),
            )
        return tuple(tools)


def _label_name(server: str) -> str:
    name = re.sub(r"\W", "_", server).strip("_") or "mcp"
    return name if not name[0].isdigit() else f"mcp_{name}"
