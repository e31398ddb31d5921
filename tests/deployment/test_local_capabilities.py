"""`roboz tool init` / `roboz skill init` output plugs into add_capabilities as the seed shows.

Each step runs in a fresh interpreter inside the generated project, as an application would:
the generated `local` namespace package must not leak into this test process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

APPLICATION = """
import json, sys
from roboz.deployment import DeployableAgent, SkillLoading
from roboz.llm import MockLLMEndpoint

from local.tools.simpsons_quotes import CAPABILITY as quote_tool
from local.skills.simpsons_quotes_skill import CAPABILITY as quote_skill

mock = MockLLMEndpoint([
    {"action": "simpsons_quotes_skill", "rationale": "load the skill"},
    {"action": "simpsons_quotes_skill_tool", "rationale": "quote"},
])
definition = DeployableAgent(name="quotes", system_prompt="Quote.", agent_endpoint=mock)
definition.add_capabilities(quote_tool, quote_skill)
if sys.argv[1] == "skill-only":
    definition.set_capability_selection({"simpsons_quotes_skill": True})
runtime, background = definition.build()
output, _ = runtime.invoke()
print(json.dumps({
    "kinds": [c.label.kind for c in definition.capabilities],
    "resolved": definition.resolve_capabilities(),
    "tools": [t.name for t in runtime.tools],
    "skills": [s.name for s in runtime.skills],
    "output": output.value,
}))
"""


def run(args: list[str], cwd: Path) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_generated_tool_and_skill_are_capabilities_an_agent_runs(tmp_path: Path) -> None:
    run([sys.executable, "-m", "roboz.cli", "tool", "init"], tmp_path)
    run([sys.executable, "-m", "roboz.cli", "skill", "init"], tmp_path)
    (tmp_path / "app.py").write_text(APPLICATION)

    everything = json.loads(run([sys.executable, "app.py", "all"], tmp_path))
    assert everything["kinds"] == ["tool", "skill"]
    assert everything["resolved"] == {
        "simpsons_quotes": True,
        "simpsons_quotes_skill": "on_demand",
    }
    assert everything["tools"] == ["simpsons_quotes"]
    assert everything["skills"] == ["simpsons_quotes_skill"]
    assert everything["output"]  # the skill's tool ended the run with a quote

    skill_only = json.loads(run([sys.executable, "app.py", "skill-only"], tmp_path))
    assert skill_only["tools"] == []
    assert skill_only["resolved"]["simpsons_quotes"] is False
