"""The two distributions agree: one version, the library pins the helper, the lock matches."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

import roboz

ROOT = Path(__file__).resolve().parents[2]


def project(path: Path) -> dict[str, object]:
    with path.open("rb") as handle:
        table = tomllib.load(handle)["project"]
    assert isinstance(table, dict)
    return table


def test_library_and_helper_share_one_version_and_the_library_pins_it() -> None:
    library = project(ROOT / "pyproject.toml")
    helper = project(ROOT / "helper" / "pyproject.toml")
    version = library["version"]
    assert helper["version"] == version == roboz.__version__
    dependencies = library["dependencies"]
    assert isinstance(dependencies, list)
    assert f"roboz-helper=={version}" in dependencies
    # Installed metadata says the same, so a built wheel resolves the matching helper.
    assert metadata.version("roboz") == metadata.version("roboz-helper") == version


def test_the_library_needs_only_the_protocol_and_the_daemon_is_an_extra() -> None:
    helper = project(ROOT / "helper" / "pyproject.toml")
    dependencies = helper["dependencies"]
    assert isinstance(dependencies, list)
    assert [d.split(">")[0] for d in dependencies] == ["msgspec"]
    extras = helper["optional-dependencies"]
    assert isinstance(extras, dict)
    assert sorted(d.split(">")[0] for d in extras["daemon"]) == ["python-prctl"]
    library = project(ROOT / "pyproject.toml")
    # The old `helper` extra is gone; the library's extras are optional features only.
    extras = sorted(library.get("optional-dependencies", {}))  # type: ignore[call-overload]
    assert extras == ["durable", "mcp", "otel", "postgres", "server"]
    # The daemon's console script comes with the helper distribution, not the library.
    assert library["scripts"] == {"roboz": "roboz.cli.app:main"}
    assert helper["scripts"] == {"roboz-helper": "roboz_helper.cli:main"}


def test_the_lock_pins_both_workspace_members_at_that_version() -> None:
    with (ROOT / "uv.lock").open("rb") as handle:
        lock = tomllib.load(handle)
    members = {p["name"]: p for p in lock["package"] if p["name"] in ("roboz", "roboz-helper")}
    version = project(ROOT / "pyproject.toml")["version"]
    assert {name: p["version"] for name, p in members.items()} == {
        "roboz": version,
        "roboz-helper": version,
    }
    assert members["roboz-helper"]["source"] == {"editable": "helper"}
