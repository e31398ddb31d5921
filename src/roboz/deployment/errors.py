"""Errors of agent deployment: each names the capability and the rule it broke."""

from __future__ import annotations


class DeploymentError(ValueError):
    """A deployable agent, its capabilities or its selection are declared inconsistently."""


class CapabilitySelectionError(DeploymentError):
    """A capability selection names an unknown capability or asks for something not allowed."""


class MissingAttributesError(DeploymentError):
    """An enabled capability needs owner settings that are not set: attributes
    (``set_attributes``) or the deployment's ``sandbox``; the message names which."""
