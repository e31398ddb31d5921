"""README.md and CONTRIBUTING.md link into docs/ with relative links, which must work on a code
host as well as on disk (the site's own links are checked by mkdocs build --strict)."""

from __future__ import annotations

import re

import pytest

from tests.docs.blocks import ROOT

LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("name", ["README.md", "CONTRIBUTING.md"])
def test_relative_links_point_at_files_of_the_repository(name: str) -> None:
    text = (ROOT / name).read_text(encoding="utf-8")
    targets = LINK.findall(text)
    assert targets, f"{name} links nowhere"
    missing = [target for target in targets if not (ROOT / target).exists()]
    assert not missing, f"{name} links to missing files: {missing}"


def test_readme_keeps_the_two_set_up_commands() -> None:
    """CI runs the second; both are what a newcomer types first."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "```sh\nbash scripts/demo.sh\n```" in text
    assert "```sh\nbash scripts/test.sh\n```" in text
