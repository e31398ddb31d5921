"""Without instrument(), an agent run loads neither OpenTelemetry nor the MCP SDK."""

import subprocess
import sys

PROGRAM = """
import sys
from roboz import Agent
from roboz.deployment import DeployableAgent
from roboz.llm import MockLLMEndpoint
from roboz.shed.capabilities import Filesystem
from roboz.tools import stop

agent = Agent("plain", agent_endpoint=MockLLMEndpoint(
    [{"action": "stop", "rationale": "done", "value": "ok"}]), tools=[stop])
assert agent.invoke()[0].value == "ok"
print(sorted(m for m in sys.modules if m.split(".")[0] in ("opentelemetry", "mcp")
             or m.startswith(("roboz.tracing", "roboz.mcp"))))
"""


def test_a_plain_run_imports_no_tracing_and_no_mcp() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
