"""Glob patterns of permission rules: compiled to regular expressions and reasoned about.

A pattern is an absolute, lexically normalized path whose components may contain ``*`` (any
characters within one component) or be ``**`` (any number of components; a final ``**``
covers the directory itself and all of its descendants).
"""

from __future__ import annotations

import posixpath
import re
from functools import lru_cache

GLOBSTAR = "**"


def absolute_pattern(pattern: str, base: str) -> str:
    """The pattern joined to ``base`` (if relative) and lexically normalized."""
    joined = pattern if pattern.startswith("/") else posixpath.join(base, pattern)
    return posixpath.normpath(joined).replace("//", "/")


def components(path: str) -> tuple[str, ...]:
    """Components of an absolute path; ``/`` has none."""
    return tuple(part for part in path.split("/") if part)


def _component_regex(component: str, star: str = "[^/]*") -> str:
    return star.join(re.escape(piece) for piece in component.split("*"))


def pattern_regex(pattern: str, *, multiline: bool = False) -> str:
    """A regex that fullmatches the absolute paths the pattern covers.

    Paths are matched without a trailing slash and the root directory is matched as "".
    ``multiline`` makes wildcards stop at newlines, for matching many newline-joined paths
    at once (compile without DOTALL then).
    """
    parts = components(pattern)
    star = "[^/\n]*" if multiline else "[^/]*"
    out: list[str] = []
    for index, part in enumerate(parts):
        if part == GLOBSTAR and index == len(parts) - 2 and _is_suffix_glob(parts[-1]):
            # **/*.ext: "ends with .ext" needs no backtracking over components.
            out.append("/.*" + re.escape(parts[-1][1:]))
            break
        if part == GLOBSTAR:
            out.append("(?:/.*)?")
        elif "**" in part:
            raise ValueError(f"pattern {pattern!r}: '**' must be a whole path component")
        else:
            out.append("/" + _component_regex(part, star))
    return "".join(out)


def _is_suffix_glob(part: str) -> bool:
    return part.startswith("*") and "*" not in part[1:] and part != GLOBSTAR


@lru_cache(maxsize=4096)
def _component_matcher(component: str) -> re.Pattern[str]:
    return re.compile(_component_regex(component))


def _component_matches(component: str, name: str) -> bool:
    if "*" not in component:
        return component == name
    return _component_matcher(component).fullmatch(name) is not None


def may_match_below(pattern: tuple[str, ...], directory: tuple[str, ...]) -> bool:
    """Whether some strict descendant of ``directory`` could match ``pattern``."""

    def walk(i: int, j: int) -> bool:
        if j == len(directory):
            return i < len(pattern)
        if i == len(pattern):
            return False
        if pattern[i] == GLOBSTAR:
            return i == len(pattern) - 1 or walk(i + 1, j) or walk(i, j + 1)
        return _component_matches(pattern[i], directory[j]) and walk(i + 1, j + 1)

    return walk(0, 0)


def covers_all_below(pattern: tuple[str, ...], directory: tuple[str, ...]) -> bool:
    """Whether every strict descendant of ``directory`` matches ``pattern``."""

    def walk(i: int, j: int) -> bool:
        if i == len(pattern) - 1 and pattern[i] == GLOBSTAR:
            return True
        if j == len(directory) or i == len(pattern):
            return False
        if pattern[i] == GLOBSTAR:
            return walk(i + 1, j) or walk(i, j + 1)
        return _component_matches(pattern[i], directory[j]) and walk(i + 1, j + 1)

    return walk(0, 0)


def name_only_below(pattern: tuple[str, ...], directory: tuple[str, ...]) -> str | None:
    """For ``P/**/NAME`` with P matching a prefix of ``directory``: NAME, since below the
    directory such a pattern matches exactly the entries whose own name matches NAME.
    Otherwise None."""
    if len(pattern) < 2 or pattern[-2] != GLOBSTAR or pattern[-1] == GLOBSTAR:
        return None
    prefix = pattern[:-2]
    if GLOBSTAR in prefix or len(prefix) > len(directory):
        return None
    if all(_component_matches(p, d) for p, d in zip(prefix, directory, strict=False)):
        return pattern[-1]
    return None


def name_regex(component: str) -> str:
    """A regex for one name component, wildcards stopping at "/" and newlines."""
    return _component_regex(component, "[^/\\n]*")
