"""The code blocks of the Markdown documentation, and how each is checked.

A fenced block's kind is given by an HTML comment on the line before it (invisible on the
site and on a code host), ``<!-- docs-test: KIND -->``:

- Python blocks run unless marked: ``fragment`` (part of an example, not run),
  ``postgres`` (run with a fresh database; see ``test_code_blocks``).
- Shell blocks (sh, bash, console, shell) must say ``run`` (executed with bash, must exit 0)
  or ``illustrative`` (shown, not run: it installs, needs a server, or needs root).
- TOML and JSON blocks are parsed unless marked ``fragment``; other languages are shown only.

A Python block's ``# prints: TEXT`` comments (at the end of a line or on a line of their own)
are its expected standard output, one line each, in order; ``...`` in one matches any text.
A block without them only has to run without error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*([a-z-]+)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
PRINTS = re.compile(r"#\s*prints:\s?(?P<text>.*)$")

PYTHON = {"python", "py", "python3"}
SHELL = {"sh", "bash", "console", "shell"}
KINDS = {
    "python": {"run", "fragment", "postgres"},
    "shell": {"run", "illustrative"},
    "data": {"run", "fragment"},
}


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    marker: str | None
    code: str

    @property
    def family(self) -> str:
        if self.lang in PYTHON:
            return "python"
        if self.lang in SHELL:
            return "shell"
        if self.lang in {"toml", "json"}:
            return "data"
        return "other"

    @property
    def kind(self) -> str:
        """What is done with the block: run, fragment, postgres, illustrative or shown."""
        if self.family == "other":
            return "shown"
        if self.marker is None:
            return "run" if self.family in {"python", "data"} else "unmarked"
        return self.marker

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    def expected_output(self) -> list[str] | None:
        lines = [m.group("text").rstrip() for m in map(PRINTS.search, self.code.splitlines()) if m]
        return lines or None


def blocks_of(path: Path) -> list[Block]:
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, fence = opening.group("indent"), opening.group("fence")
        previous = next((line for line in reversed(lines[:index]) if line.strip()), "")
        marked = MARKER.match(previous)
        body: list[str] = []
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            body.append(lines[end][len(indent) :] if lines[end].startswith(indent) else lines[end])
            end += 1
        found.append(
            Block(
                path=path,
                line=index + 1,
                lang=opening.group("lang").lower(),
                marker=marked.group(1) if marked else None,
                code="\n".join(body) + "\n",
            )
        )
        index = end + 1
    return found


def documentation_files() -> list[Path]:
    """Every Markdown page whose blocks are checked: the site, README and CONTRIBUTING."""
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted(DOCS.rglob("*.md"))]


def all_blocks() -> list[Block]:
    return [block for path in documentation_files() if path.exists() for block in blocks_of(path)]


def matches(expected: str, actual: str) -> bool:
    """One expected line against one printed line; ``...`` stands for any text."""
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, actual.rstrip()) is not None


def block_under(path: Path, heading: str, lang: str = "python", nth: int = 0) -> Block:
    """The ``nth`` block of ``lang`` after the line ``heading`` in ``path`` (for tests that
    check one example more closely)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = lines.index(heading) + 1
    candidates = [b for b in blocks_of(path) if b.line > start and b.lang == lang]
    return candidates[nth]
