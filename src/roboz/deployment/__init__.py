"""Deployable agents: definitions assembled from labelled capabilities and built on demand."""

from roboz.deployment.capability import Capability, RuntimeValue
from roboz.deployment.deployable import DeployableAgent
from roboz.deployment.errors import (
    CapabilitySelectionError,
    DeploymentError,
    MissingAttributesError,
)
from roboz.deployment.labels import Label, SkillLabel, SkillLoading, ToolLabel
from roboz.deployment.selection import Choice

__all__ = [
    "Capability",
    "CapabilitySelectionError",
    "Choice",
    "DeployableAgent",
    "DeploymentError",
    "Label",
    "MissingAttributesError",
    "RuntimeValue",
    "SkillLabel",
    "SkillLoading",
    "ToolLabel",
]
