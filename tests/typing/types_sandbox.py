"""A deployment's sandbox is a Sandbox layout or a PermissionPolicy, nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import assert_type

from roboz.deployment import DeployableAgent
from roboz.shed.models import ActionVerdict
from roboz.shed.sandbox import PermissionPolicy, Sandbox

layout = Sandbox(root=Path("/srv"), project="p")
policy = PermissionPolicy(base=Path("/srv"), default_verdict=ActionVerdict.deny)

agent = DeployableAgent("d", sandbox=layout)
agent.sandbox = policy


def configured(definition: DeployableAgent) -> None:
    assert_type(definition.sandbox, Sandbox | PermissionPolicy | None)


DeployableAgent("d", sandbox="/srv")  # type: ignore[arg-type]
