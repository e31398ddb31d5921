"""show_agent_info is the complete configuration: it lists the agent's dependencies (its
endpoint, and what a deployment's included capabilities rely on)."""

from __future__ import annotations

import socket as _socket
from pathlib import Path

from roboz import Agent
from roboz.deployment import DeployableAgent
from roboz.llm import MockLLMEndpoint
from roboz.shed.capabilities import Filesystem, SafeScripts
from roboz.shed.sandbox import Sandbox
from roboz.tools import stop


def dependency_lines(info: str) -> list[str]:
    """The entries under ``dependencies:`` (indented one level deeper)."""
    lines = info.splitlines()
    start = lines.index("  dependencies:") + 1
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("    "))
    return [line.strip() for line in lines[start:end]]


def test_an_agent_lists_its_endpoint_as_a_dependency() -> None:
    agent = Agent(name="a", agent_endpoint=MockLLMEndpoint([]), tools=[stop])
    assert dependency_lines(agent.show_agent_info(print_it=False)) == ["LLM endpoint mock"]


def test_a_built_runtime_lists_what_its_included_capabilities_rely_on(tmp_path: Path) -> None:
    socket = tmp_path / "helper.sock"
    # A socket file is there (SafeScripts checks it at build); nothing needs to listen on it.
    listener = _socket.socket(_socket.AF_UNIX)
    listener.bind(str(socket))
    definition = DeployableAgent(
        "d",
        agent_endpoint=MockLLMEndpoint([]),
        sandbox=Sandbox(root=tmp_path, project="p"),
        capabilities=[Filesystem(), SafeScripts(socket_path=socket)],
    )
    runtime, _ = definition.build()
    listed = dependency_lines(runtime.show_agent_info(print_it=False))
    assert listed[0] == "LLM endpoint mock"
    assert f"helper socket {socket}" in listed
    assert any(line.startswith("executable rg") for line in listed)
    assert len(listed) == len(set(listed))  # the endpoint is not named twice
    # A capability left out of the selection adds nothing to what the runtime relies on.
    definition.set_capability_selection({"filesystem": True})
    runtime, _ = definition.build()
    listed = dependency_lines(runtime.show_agent_info(print_it=False))
    assert not any(line.startswith("helper socket") for line in listed)
    listener.close()
