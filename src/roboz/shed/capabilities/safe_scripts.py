"""SafeScripts: the run_shell_script tool against the SafeScripts helper daemon."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from roboz.deployment import Capability, DeploymentError, RuntimeValue, ToolLabel
from roboz.shed.capabilities.files import owner_policy
from roboz.shed.dependency_health import HelperSocketDependency
from roboz.shed.safe_scripts.client import SafeScriptsClient
from roboz.shed.safe_scripts.tool import get_run_shell_script

if TYPE_CHECKING:
    from roboz.dependencies import ExternalDependency
    from roboz.deployment import DeployableAgent
    from roboz.runtime.events import EventPipe

# Labels are immutable, so one default instance can be shared by every capability.
SAFE_SCRIPTS_LABEL = ToolLabel("run_shell_script", selectable=True)


class SafeScripts(Capability):
    """Lists and runs the scripts the helper's policy allows this process; declares the
    helper socket as an external dependency. On an agent with a sandbox (its guarded
    files' PermissionPolicy) every run is narrowed by that same PermissionPolicy: what the
    file tools deny is absent inside the sandbox too."""

    def __init__(
        self,
        *,
        socket_path: str | os.PathLike[str],
        label: ToolLabel = SAFE_SCRIPTS_LABEL,
        timeout: float = 10.0,
    ) -> None:
        if not isinstance(label, ToolLabel):
            raise TypeError(
                f"SafeScripts builds a tool, so its label must be a ToolLabel, got {label!r}"
            )
        super().__init__(label=label)
        self.socket_path = os.fspath(socket_path)
        self.timeout = timeout

    def build(self, agent: DeployableAgent, pipe: EventPipe) -> tuple[RuntimeValue, ...]:
        # Only the file is checked here (building connects to nothing): a missing socket is a
        # deployment mistake to report now, not a run that ends with the LLM told "no helper".
        failure = HelperSocketDependency(self.socket_path).check_socket_file()
        if failure is not None:
            raise DeploymentError(f"agent {agent.name!r}: SafeScripts: {failure.message}")
        # The agent's file policy, if it has a sandbox, goes with every run (a restriction
        # only): what its guarded file tools deny is absent inside the sandbox too.
        file_policy = owner_policy(agent) if agent.sandbox is not None else None
        client = SafeScriptsClient(self.socket_path, timeout=self.timeout, file_policy=file_policy)
        return (get_run_shell_script(client),)

    def external_dependencies(self) -> tuple[ExternalDependency, ...]:
        return (HelperSocketDependency(self.socket_path),)
