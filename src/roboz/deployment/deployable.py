"""DeployableAgent: an agent definition (one ordered capability collection plus choices)
that builds fresh ``roboz.Agent`` runtimes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from roboz.agent import Agent, AgentMode
from roboz.dependencies import ExternalDependency, LLMEndpointDependency
from roboz.deployment.capability import Capability, check_build_result
from roboz.deployment.errors import DeploymentError, MissingAttributesError
from roboz.deployment.labels import SkillLoading, ToolLabel
from roboz.deployment.selection import Choice, effective_choice, resolve, validate_selection
from roboz.llm import EndpointLike
from roboz.models import Message
from roboz.runtime.events import EventPipe
from roboz.runtime.io import UserIO
from roboz.tools import Skill, Tool

if TYPE_CHECKING:
    # Types only: the Shed builds on the deployment, so importing it here at run time would
    # point an arrow up (the setter checks with a local import instead).
    from roboz.shed.sandbox import PermissionPolicy, Sandbox

InitialMessage = Message | str | Path
SandboxSetting: TypeAlias = "Sandbox | PermissionPolicy"
"""What ``DeployableAgent(sandbox=...)`` takes: a Sandbox layout (its ``permissions()`` are the
policy) or a PermissionPolicy itself."""
SANDBOX_HINT = (
    "give the agent a sandbox: DeployableAgent(..., sandbox=...) or agent.sandbox = ..., "
    "a Sandbox layout or a PermissionPolicy (roboz.shed.sandbox)"
)

# Fields with their own meaning to the definition; set_attributes() must not shadow them.
STRUCTURAL_FIELDS = frozenset(
    {
        "name",
        "description",
        "system_prompt",
        "mode",
        "automatic_tool_prompt",
        "agent_endpoint",
        "initial_messages",
        "initial_prompt",
        "capabilities",
        "capability_selection",
        "event_pipe",
        "user_io",
        "sandbox",
        "attributes",
    }
)


class DeployableAgent:
    """An agent definition: capabilities in declaration order, a selection, configuration.

    ``build()`` returns a fresh runtime each time; runtimes built earlier keep their
    configuration when the definition changes later. ``sandbox`` is where the agent's guarded
    Shed tools may work (a Sandbox layout or a PermissionPolicy); capabilities such as
    Filesystem and Pdf derive their policy from it.
    """

    def __init__(
        self,
        name: str,
        system_prompt: str = "",
        *,
        capabilities: Iterable[Capability] = (),
        description: str = "",
        mode: AgentMode = AgentMode.STEERABLE,
        agent_endpoint: EndpointLike | None = None,
        automatic_tool_prompt: bool = True,
        initial_messages: Sequence[InitialMessage] = (),
        initial_prompt: str | None = None,
        event_pipe: EventPipe | None = None,
        user_io: UserIO | None = None,
        sandbox: SandboxSetting | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.system_prompt = system_prompt
        self.mode = mode
        self.agent_endpoint = agent_endpoint
        self.automatic_tool_prompt = automatic_tool_prompt
        self.initial_messages = tuple(initial_messages)
        self.initial_prompt = initial_prompt
        self.event_pipe = event_pipe if event_pipe is not None else EventPipe()
        self.user_io = user_io
        self.sandbox = sandbox
        self._capabilities: tuple[Capability, ...] = ()
        self._selection: Mapping[str, Choice] | None = None
        self._attributes: dict[str, Any] = {}
        self.add_capabilities(*capabilities)

    # -- configuration -------------------------------------------------------------------------

    @property
    def mode(self) -> AgentMode:
        return self._mode

    @mode.setter
    def mode(self, mode: AgentMode) -> None:
        self._mode = AgentMode(mode)

    @property
    def initial_messages(self) -> tuple[InitialMessage, ...]:
        return self._initial_messages

    @initial_messages.setter
    def initial_messages(self, messages: tuple[InitialMessage, ...]) -> None:
        self._initial_messages = _checked_messages(self.name, messages)

    @property
    def sandbox(self) -> SandboxSetting | None:
        """The Sandbox layout or PermissionPolicy the agent's guarded tools enforce."""
        return self._sandbox

    @sandbox.setter
    def sandbox(self, sandbox: SandboxSetting | None) -> None:
        from roboz.shed.sandbox import PermissionPolicy, Sandbox

        if sandbox is not None and not isinstance(sandbox, Sandbox | PermissionPolicy):
            raise DeploymentError(
                f"agent {self.name!r}: sandbox must be a Sandbox layout or a PermissionPolicy "
                f"(roboz.shed.sandbox), got {type(sandbox).__name__}"
            )
        self._sandbox = sandbox

    def set_agent_endpoint(self, endpoint: EndpointLike | None) -> None:
        self.agent_endpoint = endpoint

    def set_initial_messages(self, messages: Sequence[InitialMessage]) -> None:
        self.initial_messages = tuple(messages)

    def set_attributes(self, **attributes: Any) -> None:
        """Capability-specific configuration that builders read (see required_attributes)."""
        structural = sorted(STRUCTURAL_FIELDS & attributes.keys())
        if structural:
            raise DeploymentError(
                f"agent {self.name!r}: set_attributes() cannot set {', '.join(structural)}; "
                "assign structural fields directly (or use set_agent_endpoint / "
                "set_initial_messages)"
            )
        self._attributes.update(attributes)

    @property
    def attributes(self) -> Mapping[str, Any]:
        return MappingProxyType(self._attributes)

    # -- capabilities and selection ------------------------------------------------------------

    @property
    def capabilities(self) -> tuple[Capability, ...]:
        return self._capabilities

    def add_capabilities(self, *capabilities: Capability) -> None:
        """Append capabilities; all are checked before any is added."""
        combined = list(self._capabilities)
        for capability in capabilities:
            if not isinstance(capability, Capability):
                raise DeploymentError(
                    f"agent {self.name!r}: {capability!r} is not a Capability; wrap tools, "
                    "chains and skills in Capability(label=..., value=...)"
                )
            for index, existing in enumerate(combined):
                if existing.name == capability.name:
                    raise DeploymentError(
                        f"agent {self.name!r}: capability names must be unique, but "
                        f"{existing.describe()} (capabilities[{index}]) and "
                        f"{capability.describe()} (capabilities[{len(combined)}]) are both "
                        f"named {capability.name!r}"
                    )
            combined.append(capability)
        self._capabilities = tuple(combined)

    @property
    def capability_selection(self) -> Mapping[str, Choice] | None:
        """The explicit selection (read-only), or None when every capability is included."""
        return self._selection

    def set_capability_selection(self, selection: Mapping[str, object] | None) -> None:
        """Replace the selection for future builds; see roboz.deployment.selection."""
        if selection is None:
            self._selection = None
            return
        checked = validate_selection(self.name, self._capabilities, selection)
        self._selection = MappingProxyType(checked)

    def resolve_capabilities(self) -> dict[str, Choice]:
        """Effective choices for every declaration; can be passed to set_capability_selection."""
        return resolve(self._capabilities, self._selection)

    def included_capabilities(self) -> list[tuple[Capability, Choice]]:
        """Included capabilities in declaration order, with True or their skill loading."""
        chosen = [(c, effective_choice(c, self._selection)) for c in self._capabilities]
        return [(capability, choice) for capability, choice in chosen if choice is not False]

    # -- building ------------------------------------------------------------------------------

    def build(self) -> tuple[Agent, tuple[Agent, ...]]:
        """A fresh runtime and the background agents contributed by included capabilities."""
        included = self.included_capabilities()
        self._check_required_attributes([capability for capability, _ in included])
        tools: list[Tool | tuple[Tool, ...]] = []
        default_tools: list[Tool] = []
        skills: list[Skill] = []
        auto_loaded_skills: list[Skill] = []
        background: list[Agent] = []
        for capability, choice in included:
            for value in check_build_result(capability, capability.build(self, self.event_pipe)):
                if isinstance(value, Skill):
                    target = auto_loaded_skills if choice is SkillLoading.AUTOMATIC else skills
                    target.append(value)
                    continue
                chain = (value,) if isinstance(value, Tool) else value
                label = capability.label
                if isinstance(label, ToolLabel) and label.default:
                    # The chain's root runs as a default; the rest follow it by chaining.
                    default_tools.append(chain[0])
                    chain = chain[1:]
                if chain:
                    tools.append(chain)
            for child in capability.background_agents():
                child_runtime, child_background = child.build()
                background += [child_runtime, *child_background]
        if background:
            # Their parent starts them (once per run) and stops them when its run ends.
            from roboz.agent.background import background_agents_tool

            default_tools.insert(0, background_agents_tool(background))
        runtime = Agent(
            self.name,
            self.system_prompt,
            agent_endpoint=self.agent_endpoint,
            tools=tools,
            default_tools=default_tools,
            mode=self.mode,
            skills=skills,
            auto_loaded_skills=auto_loaded_skills,
            event_pipe=self.event_pipe,
            user_io=self.user_io,
            automatic_tool_prompt=self.automatic_tool_prompt,
            initial_messages=[_materialize(message) for message in self.initial_messages],
            initial_prompt=self.initial_prompt,
            description=self.description,
            external_dependencies=self._built_dependencies([c for c, _ in included]),
        )
        return runtime, tuple(background)

    def _check_required_attributes(self, included: Iterable[Capability]) -> None:
        problems: list[str] = []
        no_sandbox = no_attributes = False
        for capability in included:
            missing = [a for a in capability.required_attributes if a not in self._attributes]
            no_attributes = no_attributes or bool(missing)
            if capability.requires_sandbox and self._sandbox is None:
                missing.insert(0, "a sandbox")
                no_sandbox = True
            if missing:
                problems.append(f"{capability.describe()} needs {', '.join(missing)}")
        if problems:
            hints = [SANDBOX_HINT] if no_sandbox else []
            hints += ["set attributes with set_attributes(...)"] if no_attributes else []
            raise MissingAttributesError(
                f"agent {self.name!r}: missing settings: {'; '.join(problems)}; "
                f"{'; '.join(hints)}; or leave those capabilities out of the selection"
            )

    # -- dependencies --------------------------------------------------------------------------

    def external_dependencies(self) -> tuple[ExternalDependency, ...]:
        """Every external resource of the declared graph, left-out capabilities and child
        definitions included, without building anything. Duplicates are reported once."""
        found: list[ExternalDependency] = []
        self._collect_dependencies(found, visited=set())
        return tuple(found)

    def _built_dependencies(self, included: Sequence[Capability]) -> list[ExternalDependency]:
        """What a runtime built from ``included`` relies on (shown by ``show_agent_info``):
        unlike ``external_dependencies``, left-out capabilities do not count."""
        found: list[ExternalDependency] = []
        if self.agent_endpoint is not None:
            found.append(LLMEndpointDependency(self.agent_endpoint))
        for capability in included:
            for dependency in (
                *(LLMEndpointDependency(e) for e in capability.endpoints()),
                *capability.external_dependencies(),
                *(
                    d
                    for child in capability.background_agents()
                    for d in child.external_dependencies()
                ),
            ):
                if dependency not in found:
                    found.append(dependency)
        return found

    def _collect_dependencies(self, found: list[ExternalDependency], visited: set[int]) -> None:
        if id(self) in visited:
            return
        visited.add(id(self))
        candidates: list[ExternalDependency] = []
        if self.agent_endpoint is not None:
            candidates.append(LLMEndpointDependency(self.agent_endpoint))
        for capability in self._capabilities:
            candidates += [LLMEndpointDependency(e) for e in capability.endpoints()]
            candidates += capability.external_dependencies()
        for candidate in candidates:
            if candidate not in found:
                found.append(candidate)
        for capability in self._capabilities:
            for child in capability.background_agents():
                child._collect_dependencies(found, visited)

    def __repr__(self) -> str:
        names = ", ".join(capability.name for capability in self._capabilities)
        return f"DeployableAgent(name={self.name!r}, capabilities=[{names}])"


def _checked_messages(owner: str, messages: object) -> tuple[InitialMessage, ...]:
    if isinstance(messages, str) or not isinstance(messages, tuple):
        raise DeploymentError(
            f"agent {owner!r}: initial_messages must be a tuple of messages, strings or paths "
            "(set_initial_messages accepts any sequence)"
        )
    checked: list[InitialMessage] = []
    for message in cast("tuple[object, ...]", messages):
        if not isinstance(message, Message | str | Path):
            raise DeploymentError(
                f"agent {owner!r}: initial message {message!r} is not a Message, str or Path"
            )
        checked.append(message)
    return tuple(checked)


def _materialize(message: InitialMessage) -> Message | str:
    # Paths are read at build time so that a runtime sees the file as it is when built.
    if isinstance(message, Path):
        return message.read_text(encoding="utf-8")
    return message
