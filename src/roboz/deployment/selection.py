"""Which declared capabilities a build includes, and how included skills load.

A selection is ``None`` (everything, as declared) or an explicit map from capability names to
``True`` (as declared), ``False`` (left out) or a SkillLoading (a skill loaded that way).
Under an explicit map fixed capabilities are always in and omitted optional ones are out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

from roboz.deployment.capability import Capability
from roboz.deployment.errors import CapabilitySelectionError
from roboz.deployment.labels import SkillLabel, SkillLoading

Choice: TypeAlias = bool | SkillLoading


def validate_selection(
    owner: str, capabilities: Sequence[Capability], selection: Mapping[str, object]
) -> dict[str, Choice]:
    """A checked copy of ``selection``; SkillLoading values given as strings are converted."""
    if not isinstance(selection, Mapping):
        raise CapabilitySelectionError(
            f"agent {owner!r}: a capability selection is None or a mapping of names, "
            f"got {type(selection).__name__}"
        )
    by_name = {capability.name: capability for capability in capabilities}
    checked: dict[str, Choice] = {}
    for name, raw in selection.items():
        capability = by_name.get(name)
        if capability is None:
            known = ", ".join(repr(n) for n in by_name) or "none"
            raise CapabilitySelectionError(
                f"agent {owner!r}: selection names {name!r}, which is not a declared "
                f"capability (declared: {known})"
            )
        checked[name] = _check_choice(owner, capability, raw)
    return checked


def _check_choice(owner: str, capability: Capability, raw: object) -> Choice:
    where = f"agent {owner!r}: {capability.describe()}"
    label = capability.label
    choice: Choice
    if isinstance(raw, bool):
        choice = raw
    elif isinstance(raw, str):
        # Persisted selections (JSON) carry loading modes as their string values.
        try:
            choice = SkillLoading(raw)
        except ValueError:
            modes = ", ".join(repr(mode.value) for mode in SkillLoading)
            raise CapabilitySelectionError(
                f"{where}: {raw!r} is not a loading mode ({modes})"
            ) from None
    else:
        raise CapabilitySelectionError(
            f"{where}: selection values are True, False or a SkillLoading, got {raw!r}"
        )
    if isinstance(choice, SkillLoading) and not isinstance(label, SkillLabel):
        raise CapabilitySelectionError(
            f"{where}: a loading mode applies to skills only; select a tool with True or False"
        )
    if not label.selectable and choice is not True:
        raise CapabilitySelectionError(
            f"{where} is fixed (its label is not declared selectable=True): it is always "
            f"included as declared, so it can only be selected with True, got {choice!r}"
        )
    return choice


def effective_choice(capability: Capability, selection: Mapping[str, Choice] | None) -> Choice:
    """False when left out; else True for a tool and the loading mode for a skill."""
    label = capability.label
    choice: Choice = True
    if label.selectable and selection is not None:
        choice = selection.get(capability.name, False)
    if choice is True and isinstance(label, SkillLabel):
        return label.loading
    return choice


def resolve(
    capabilities: Sequence[Capability], selection: Mapping[str, Choice] | None
) -> dict[str, Choice]:
    """Every declaration's effective choice, in declaration order (fixed ones report True)."""
    resolved: dict[str, Choice] = {}
    for capability in capabilities:
        resolved[capability.name] = (
            True if not capability.label.selectable else effective_choice(capability, selection)
        )
    return resolved
