"""Errors of agent deployment: each names the capability and the rule it broke."""

from __future__ import annotations


class DeploymentError(ValueError):
    """A deployable agent, its capabilities or its selection are declared inconsistently."""


class CapabilitySelectionError(DeploymentError):
    """A capability selection names an unknown capability or asks for something not allowed."""


class MissingAttributesError(DeploymentError):
    """An enabled capability needs owner attributes (``set_attributes``) that are not set."""
