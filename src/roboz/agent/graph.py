"""Which tools an agent has, how they chain, and the checks that run when it is built."""

from __future__ import annotations

from collections.abc import Iterable

from roboz.agent.errors import AgentConfigurationError
from roboz.models import Empty, Invoke, Stop
from roboz.tools import Tool


def _type_names(types: Iterable[type]) -> str:
    return " | ".join(t.__name__ for t in types)


class ToolGraph:
    """Tools by name, and each parent's chained children in declaration order."""

    def __init__(self) -> None:
        self.tools: dict[str, Tool] = {}
        self.children: dict[str, list[Tool]] = {}

    def add(
        self, tools: Iterable[Tool], *, origin: str = "tools", later_parents: type | None = None
    ) -> None:
        """Register tools and their chain edges; all checks pass before anything changes.

        A tool whose input is ``later_parents`` (or a subclass) may name a parent that is not
        here yet (a client tool, which comes with a run); its link is checked by the run."""
        new = list(tools)
        names = dict(self.tools)
        for item in new:
            if not isinstance(item, Tool):
                raise AgentConfigurationError(
                    f"{origin}: {item!r} is not a Tool (call factories with their context)"
                )
            existing = names.get(item.name)
            if existing is not None and existing is not item:
                raise AgentConfigurationError(
                    f"{origin}: two different tools are named {item.name!r}; names must be unique"
                )
            names[item.name] = item
        for item in new:
            for parent_name in item.chained_to:
                parent = names.get(parent_name)
                if (
                    parent is None
                    and later_parents is not None
                    and issubclass(item.input_type, later_parents)
                ):
                    continue
                if parent is None:
                    raise AgentConfigurationError(
                        f"tool {item.name!r} is chained to {parent_name!r}, which this agent "
                        "does not have; add it to tools or default_tools"
                    )
                check_link(parent, item)
        for item in new:
            if item.name in self.tools:
                continue
            self.tools[item.name] = item
            for parent_name in item.chained_to:
                self.children.setdefault(parent_name, []).append(item)

    def next_in_chain(self, parent: Tool, output: Empty) -> Tool | None:
        """The single child whose input fits ``output`` and whose condition is true."""
        found: Tool | None = None
        for child in self.children.get(parent.name, ()):
            if isinstance(output, child.input_type) and (
                child.chain_condition is None or child.chain_condition(output)
            ):
                if found is not None:  # rare: gather them all for the error
                    fired = [found, *self._also_fired(parent, output, found, child)]
                    names = ", ".join(repr(item.name) for item in fired)
                    raise ChainConflict(parent.name, [item.name for item in fired], names)
                found = child
        return found

    def _also_fired(self, parent: Tool, output: Empty, first: Tool, second: Tool) -> list[Tool]:
        children = self.children[parent.name]
        rest = children[children.index(second) + 1 :]
        return [second] + [
            child
            for child in rest
            if isinstance(output, child.input_type)
            and (child.chain_condition is None or child.chain_condition(output))
        ]


class ChainConflict(Exception):
    def __init__(self, parent: str, children: list[str], names: str) -> None:
        super().__init__(
            f"after {parent!r}, more than one chained tool has a true condition: {names}; "
            "chain conditions of one parent must be mutually exclusive"
        )
        self.parent = parent
        self.children = children


def check_link(parent: Tool, child: Tool) -> None:
    """The parent's output must be usable as the child's input (class inheritance)."""
    flowing = [t for t in parent.output_types if not issubclass(t, Stop | Invoke)]
    if not flowing:
        raise AgentConfigurationError(
            f"tool {child.name!r} is chained to {parent.name!r}, but {parent.name!r} only "
            f"returns {_type_names(parent.output_types)}, which never flows down a chain"
        )
    misfits = [t for t in flowing if not issubclass(t, child.input_type)]
    if misfits:
        raise AgentConfigurationError(
            f"chain {parent.name!r} -> {child.name!r}: {parent.name!r} returns "
            f"{_type_names(misfits)}, which is not a subclass of {child.name!r}'s input "
            f"{child.input_type.__name__}"
        )
