"""A readable description of an agent's whole configuration (``show_agent_info``)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence

from roboz.agent.graph import ToolGraph
from roboz.agent.run import PROMPT_LLM, Scheduler
from roboz.agent.spec import RunSpec
from roboz.agent.transcript import MemoryTranscript
from roboz.dependencies import ExternalDependency, LLMEndpointDependency
from roboz.models import Message
from roboz.runtime.events import Sink
from roboz.runtime.io import UserIO


def _condition(source: object) -> str:
    if source is None:
        return "always"
    try:
        text = inspect.getsource(source).strip()  # type: ignore[arg-type]
    except (OSError, TypeError):
        return repr(source)
    marker = "chain_condition="
    if marker in text:
        text = text.split(marker, 1)[1].rstrip(")").strip()
    return text if len(text) < 90 else text[:89] + "…"


def describe_agent(
    agent: RunSpec,
    *,
    description: str,
    sinks: Sequence[Sink],
    user_io: UserIO | None,
    initial_messages: Sequence[Message],
    persistence: str = "in memory; invoke() returns the conversation",
    dependencies: Sequence[ExternalDependency] = (),
) -> str:
    preview = Scheduler(agent, MemoryTranscript(list(initial_messages)))
    endpoint = agent.endpoint
    lines = [
        f"Agent {agent.name!r}" + (f": {description}" if description else ""),
        f"  mode: {agent.mode.value}",
        "  endpoint: "
        + (
            "none"
            if endpoint is None
            else f"{type(endpoint).__name__} model={endpoint.model_name} "
            f"max_context_tokens={endpoint.max_context_tokens} "
            f"accepts_images={endpoint.accepts_images}"
        ),
        f"  automatic tool prompt: {'on' if agent.automatic_tool_prompt else 'off'}",
        f"  limits: max_steps={agent.max_steps} max_repairs={agent.max_repairs}",
        "  defaults (in order): " + (", ".join(t.name for t in preview.defaults) or "none"),
        "  actions offered to the LLM: "
        + (", ".join(preview.actions()) if agent.llm_driven else "none (deterministic)"),
        "  chains:",
    ]
    # Chains of every skill too, loaded or not: the configuration, not the run's state.
    graph = ToolGraph()
    graph.add([*agent.tools, *agent.default_tools])
    for skill in agent.skills + agent.auto_loaded_skills:
        for item in skill.with_prerequisites():
            graph.add(item.tools, origin=item.name)
    chains = [
        f"    {parent} -> {child.name} when {_condition(child.chain_condition)}"
        for parent, children in graph.children.items()
        for child in children
    ]
    lines += chains or ["    none"]
    lines.append("  skills on demand: " + (", ".join(s.name for s in agent.skills) or "none"))
    lines.append(
        "  skills loaded at start: "
        + (", ".join(s.name for s in agent.auto_loaded_skills) or "none")
    )
    lines.append("  event sinks: " + (", ".join(type(s).__name__ for s in sinks) or "none"))
    lines.append("  user io: " + (type(user_io).__name__ if user_io else "CliUserIO (default)"))
    # The agent's own endpoint first; a deployment's list names it again (once is enough).
    found: list[ExternalDependency] = []
    if endpoint is not None:
        found.append(LLMEndpointDependency(endpoint))
    found += [d for d in dependencies if d not in found]
    lines.append("  dependencies:" if found else "  dependencies: none")
    lines += [f"    {dependency.name}" for dependency in found]
    lines.append(f"  persistence: {persistence}")
    lines.append(f"  initial messages: {len(initial_messages)}")
    if agent.initial_prompt is not None:
        lines.append(
            f"  initial prompt (asks the user when a run has no message of theirs): "
            f"{agent.initial_prompt!r}"
        )
    if agent.llm_driven:
        lines += ["", f"System prompt ({PROMPT_LLM}):", preview.system_prompt()]
    return "\n".join(lines)
