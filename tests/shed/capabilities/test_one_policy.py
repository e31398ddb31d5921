"""One policy, two enforcers (issue 25): an agent whose guarded files deny ``secrets/**``
cannot read the secret with run_file_command, nor with run_shell_script through the real
helper, because SafeScripts sends the agent's PermissionPolicy with every run; and
show_agent_info shows that composed view."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from roboz import AgentMode
from roboz.deployment import Capability, DeployableAgent, ToolLabel
from roboz.llm import MockLLMEndpoint
from roboz.models import Role
from roboz.shed.capabilities import Filesystem, SafeScripts
from roboz.shed.models import ActionVerdict, PermissionRule
from roboz.shed.sandbox import PermissionPolicy
from roboz.tools import stop
from tests.shed.scripts_helper import NOBODY, Helper, serving

SECRET = "s3cr3t-api-key"
SCRIPTS = {"cat.sh": '#!/bin/sh\n# Print the files named in the arguments.\ncat "$@"\n'}


@pytest.fixture(scope="session")
def _one_policy_helper(xprocess: object) -> Iterator[Helper]:
    with serving(xprocess, "roboz_one_policy_helper", SCRIPTS) as helper:
        yield helper


@pytest.fixture
def helper(needs_root: None, request: pytest.FixtureRequest) -> Helper:
    daemon: Helper = request.getfixturevalue("_one_policy_helper")
    work = daemon.base / "work"
    (work / "secrets").mkdir(exist_ok=True)
    (work / "secrets" / "api.key").write_text(SECRET)
    (work / "notes.txt").write_text("public notes\n")
    for path in (work / "secrets", work / "secrets" / "api.key", work / "notes.txt"):
        os.chown(path, NOBODY, NOBODY)
    return daemon


def test_an_agent_denied_a_file_reads_it_with_neither_tool(helper: Helper) -> None:
    work = helper.base / "work"
    mock = MockLLMEndpoint(
        [
            {"action": "run_file_command", "rationale": "read it",
             "value": [["cat", "CMD"], ["secrets/api.key", "PTH"]]},
            {"action": "run_shell_script", "rationale": "read it another way",
             "script": "cat.sh", "args": ["secrets/api.key", f"{work}/secrets/api.key",
                                          "notes.txt"]},
            {"action": "stop", "rationale": "done", "value": "tried"},
        ]
    )  # fmt: skip
    definition = DeployableAgent(
        "reader",
        "Read files when asked.",
        mode=AgentMode.AUTONOMOUS,
        agent_endpoint=mock,
        capabilities=[
            Filesystem(),
            SafeScripts(socket_path=helper.socket_path),
            Capability(label=ToolLabel("stop", selectable=False), value=stop),
        ],
    )
    definition.sandbox = PermissionPolicy(
        base=work,
        default_verdict=ActionVerdict.deny,
        allow=(PermissionRule(pattern="**"),),
        deny=(PermissionRule(pattern="secrets/**"),),
    )
    runtime, _ = definition.build()
    info = runtime.show_agent_info(print_it=False)
    assert "Every run sees the files through your file policy" in info
    assert "deny: secrets/** (create,delete,read)" in info

    output, messages = runtime.invoke()

    assert output.value == "tried"
    results = [m.content for m in messages if m.role is Role.TOOL]
    assert all(SECRET not in content for content in results), results
    script = next(json.loads(m.content) for m in messages
                  if m.role is Role.TOOL and m.caller == "run_shell_script")  # fmt: skip
    assert "public notes" in script["value"]  # what is allowed is still there
    assert (work / "secrets" / "api.key").read_text() == SECRET
