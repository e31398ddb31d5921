"""The Shed's guard layout: the seed's public import, private internals, one face each."""

from __future__ import annotations

import importlib
import pkgutil

import roboz.shed.guard
import roboz.shed.sandbox


def test_the_seed_import_of_the_policy_works():
    from roboz.shed.sandbox import PermissionPolicy

    assert PermissionPolicy.__name__ == "PermissionPolicy"
    assert roboz.shed.sandbox.__all__ == ["PermissionPolicy", "Sandbox", "SandboxError"]


def test_the_guard_internals_are_private_behind_one_face():
    modules = [info.name for info in pkgutil.iter_modules(roboz.shed.guard.__path__)]
    assert modules and all(name.startswith("_") for name in modules), modules
    for name in roboz.shed.guard.__all__:
        assert getattr(roboz.shed.guard, name) is not None
    # nothing of the guard is left under the sandbox's name
    for gone in ("guard", "fsops", "resolve", "deadline", "patterns"):
        try:
            importlib.import_module(f"roboz.shed.sandbox.{gone}")
        except ModuleNotFoundError:
            continue
        raise AssertionError(f"roboz.shed.sandbox.{gone} still exists")
