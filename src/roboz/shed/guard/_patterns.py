"""The glob patterns of permission rules live in the helper's distribution
(``roboz_helper.file_patterns``), so the guarded file tools and the sandbox's view of the
workdir match a path by the same code and can never disagree about it."""

from roboz_helper.file_patterns import (
    GLOBSTAR,
    absolute_pattern,
    components,
    covers_all_below,
    may_match_below,
    name_only_below,
    name_regex,
    pattern_regex,
)

__all__ = [
    "GLOBSTAR",
    "absolute_pattern",
    "components",
    "covers_all_below",
    "may_match_below",
    "name_only_below",
    "name_regex",
    "pattern_regex",
]
