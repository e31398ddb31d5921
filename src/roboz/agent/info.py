"""A readable description of an agent's whole configuration (``show_agent_info``)."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

from roboz.agent.graph import ToolGraph
from roboz.agent.run import PROMPT_LLM, AgentRun

if TYPE_CHECKING:
    from roboz.agent.agent import Agent


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


def describe_agent(agent: Agent) -> str:
    preview = AgentRun(agent, list(agent.initial_messages))
    endpoint = agent.agent_endpoint
    lines = [
        f"Agent {agent.name!r}" + (f": {agent.description}" if agent.description else ""),
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
    sinks = agent.event_pipe.sinks
    lines.append("  event sinks: " + (", ".join(type(s).__name__ for s in sinks) or "none"))
    lines.append(
        "  user io: " + (type(agent.user_io).__name__ if agent.user_io else "CliUserIO (default)")
    )
    if agent.store is None:
        lines.append("  persistence: in memory; invoke() returns the conversation")
    else:
        from roboz.agent.persistence import store_label

        thread = agent.thread_id or "a new thread per invoke() unless thread_id= is given"
        lines.append(f"  persistence: {store_label(agent.store)}, thread {thread}")
    lines.append(f"  initial messages: {len(agent.initial_messages)}")
    if agent.llm_driven:
        lines += ["", f"System prompt ({PROMPT_LLM}):", preview.system_prompt()]
    return "\n".join(lines)
