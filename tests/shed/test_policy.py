"""PermissionPolicy: rule semantics, precedence, and the subtree over-estimate."""

from __future__ import annotations

import itertools
import random

import pytest

from roboz.shed.models import ActionVerdict, Operation, PermissionRule
from roboz.shed.sandbox import PermissionPolicy

R, C, D = Operation.READ, Operation.CREATE, Operation.DELETE


def rule(pattern: str, *ops: Operation) -> PermissionRule:
    return PermissionRule(pattern=pattern, operations=set(ops or Operation))


def test_seed_example_constructs_and_decides(tmp_path):
    policy = PermissionPolicy(
        base=tmp_path,
        default_verdict=ActionVerdict.deny,
        allow=(PermissionRule(pattern="notes/**", operations={R, C, D}),),
    )
    assert policy.verdict("notes", R) is ActionVerdict.allow  # dir/** covers the dir itself
    assert policy.verdict("notes/a/b.txt", D) is ActionVerdict.allow
    assert policy.verdict("notesX/a", R) is ActionVerdict.deny
    assert policy.verdict("other.txt", R) is ActionVerdict.deny
    assert policy.verdict(tmp_path / "notes" / "x", C) is ActionVerdict.allow


def test_dotdot_is_normalized_before_matching(tmp_path):
    policy = PermissionPolicy(base=tmp_path, allow=(rule("notes/**"),))
    assert policy.verdict("notes/../secret.txt", R) is ActionVerdict.deny
    assert policy.verdict("other/../notes/x", R) is ActionVerdict.allow


def test_star_stays_within_a_component_and_globstar_spans(tmp_path):
    policy = PermissionPolicy(base=tmp_path, allow=(rule("*.md"), rule("docs/**/*.txt")))
    assert policy.verdict("a.md", R) is ActionVerdict.allow
    assert policy.verdict("sub/a.md", R) is ActionVerdict.deny
    assert policy.verdict("docs/a.txt", R) is ActionVerdict.allow
    assert policy.verdict("docs/x/y/a.txt", R) is ActionVerdict.allow
    assert policy.verdict("docs/x/y/a.md", R) is ActionVerdict.deny


def test_absolute_patterns(tmp_path):
    policy = PermissionPolicy(base=tmp_path / "b", allow=(rule(f"{tmp_path}/shared/**", R),))
    assert policy.verdict(tmp_path / "shared" / "x", R) is ActionVerdict.allow
    assert policy.verdict(tmp_path / "shared" / "x", C) is ActionVerdict.deny


def test_operations_are_separate(tmp_path):
    policy = PermissionPolicy(base=tmp_path, allow=(rule("ro/**", R),))
    assert policy.verdict("ro/a", R) is ActionVerdict.allow
    assert policy.verdict("ro/a", C) is ActionVerdict.deny
    assert policy.verdict("ro/a", D) is ActionVerdict.deny


def test_deny_beats_allow_by_default_and_allow_can_take_precedence(tmp_path):
    rules = {"allow": (rule("notes/**"),), "deny": (rule("notes/private/**"),)}
    default = PermissionPolicy(base=tmp_path, **rules)
    assert default.verdict("notes/private/x", R) is ActionVerdict.deny
    assert default.verdict("notes/x", R) is ActionVerdict.allow
    flipped = PermissionPolicy(base=tmp_path, precedence=ActionVerdict.allow, **rules)
    assert flipped.verdict("notes/private/x", R) is ActionVerdict.allow


def test_ask_never_overrides_deny_under_either_precedence(tmp_path):
    for precedence in (ActionVerdict.deny, ActionVerdict.allow):
        policy = PermissionPolicy(
            base=tmp_path, deny=(rule("x/**"),), ask=(rule("x/**"),), precedence=precedence
        )
        assert policy.verdict("x/a", R) is ActionVerdict.deny


def test_ask_beats_allow_unless_allow_has_precedence(tmp_path):
    rules = {"allow": (rule("**"),), "ask": (rule("big/**", D),)}
    assert PermissionPolicy(base=tmp_path, **rules).verdict("big/x", D) is ActionVerdict.ask
    flipped = PermissionPolicy(base=tmp_path, precedence=ActionVerdict.allow, **rules)
    assert flipped.verdict("big/x", D) is ActionVerdict.allow


def test_default_verdict_applies_where_no_rule_matches(tmp_path):
    policy = PermissionPolicy(
        base=tmp_path, default_verdict=ActionVerdict.allow, deny=(rule(".env"),)
    )
    assert policy.verdict("anything", R) is ActionVerdict.allow
    assert policy.verdict(".env", R) is ActionVerdict.deny


def test_unsupported_patterns_are_rejected():
    for bad in ("a?.txt", "[ab].txt", ""):
        with pytest.raises(ValueError):
            PermissionRule(pattern=bad)
    with pytest.raises(ValueError):
        PermissionPolicy(base="/tmp", allow=(rule("a**b"),))
    with pytest.raises(ValueError):
        PermissionPolicy(base="/tmp", precedence=ActionVerdict.ask)


def test_verdicts_below_never_underestimates(tmp_path):
    """The subtree shortcut must include every verdict any real descendant gets."""
    base = "/b"
    patterns = ["notes/**", "notes/private/**", "**/*.key", "*.md", "docs/**/x", "a/*/c/**"]
    rng = random.Random(7)
    names = ["notes", "private", "a", "b", "c", "x", "k.key", "r.md", "docs"]
    dirs = ["/b"] + [
        "/b/" + "/".join(p) for n in (1, 2) for p in itertools.product(names, repeat=n)
    ]
    for _ in range(30):
        chosen = rng.sample(patterns, 3)
        policy = PermissionPolicy(
            base=base,
            default_verdict=rng.choice(list(ActionVerdict)),
            allow=(rule(chosen[0]),),
            deny=(rule(chosen[1]),),
            ask=(rule(chosen[2]),),
        )
        for directory in dirs:
            estimate = policy.verdicts_below(directory, R)
            for tail in itertools.product(names, repeat=2):
                for depth in (1, 2):
                    path = directory + "/" + "/".join(tail[:depth])
                    assert policy.decide(path, R) in estimate, (directory, path, chosen)


def _reference(parts: tuple[str, ...], path: tuple[str, ...]) -> bool:
    """Component-by-component glob matching, the definition the compiled regexes must meet."""
    import fnmatch

    if not parts:
        return not path
    if parts[0] == "**":
        return _reference(parts[1:], path) or (bool(path) and _reference(parts, path[1:]))
    return bool(path) and fnmatch.fnmatchcase(path[0], parts[0]) and _reference(parts[1:], path[1:])


PATTERNS = [
    "notes/**",
    "notes/private/**",
    "**/*.key",
    "*.md",
    "docs/**/x",
    "a/*/c/**",
    "**/.env",
    "**",
    "a/**/b/*.txt",
    "d*/**/e*",
    "**/x/**",
]
NAMES = [
    "notes",
    "private",
    "a",
    "b",
    "c",
    "x",
    "k.key",
    "r.md",
    "docs",
    ".env",
    "e.txt",
    "d1",
    "b.txt",
]


def test_compiled_decisions_match_the_component_definition():
    rng = random.Random(11)
    for _ in range(60):
        chosen = rng.sample(PATTERNS, 3)
        policy = PermissionPolicy(
            base="/b",
            allow=(rule(chosen[0]),),
            deny=(rule(chosen[1]),),
            ask=(rule(chosen[2]),),
            precedence=rng.choice([ActionVerdict.deny, ActionVerdict.allow]),
        )
        order = (
            [ActionVerdict.deny, ActionVerdict.ask, ActionVerdict.allow]
            if policy.precedence is ActionVerdict.deny
            else [ActionVerdict.allow, ActionVerdict.deny, ActionVerdict.ask]
        )
        patterns = dict(
            zip([ActionVerdict.allow, ActionVerdict.deny, ActionVerdict.ask], chosen, strict=True)
        )
        for _ in range(40):
            path = tuple(rng.choice(NAMES) for _ in range(rng.randint(1, 5)))
            expected = next(
                (
                    v
                    for v in order
                    if _reference(tuple(("b/" + patterns[v]).split("/")), ("b", *path))
                ),
                policy.default_verdict,
            )
            assert policy.decide("/b/" + "/".join(path), R) is expected, (chosen, path)


def test_bulk_and_subtree_verdicts_equal_single_decisions():
    rng = random.Random(5)
    for _ in range(60):
        chosen = rng.sample(PATTERNS, 4)
        policy = PermissionPolicy(
            base="/b",
            default_verdict=rng.choice(list(ActionVerdict)),
            allow=(rule(chosen[0]), rule(chosen[3])),
            deny=(rule(chosen[1]),),
            ask=(rule(chosen[2]),),
            precedence=rng.choice([ActionVerdict.deny, ActionVerdict.allow]),
        )
        for top in ("/b", "/b/notes", "/b/a/x", "/b/d1/q"):
            rels = [
                "/".join(rng.choice(NAMES) for _ in range(rng.randint(1, 4)))
                for _ in range(rng.randint(1, 30))
            ]
            expected = {policy.decide(f"{top}/{rel}", R) for rel in rels}
            names = [rel.rsplit("/", 1)[-1] for rel in rels]
            assert policy.subtree_verdicts(top, rels, R, names) == expected, (chosen, top)
            if not policy.needs_paths_below(top, R):
                assert policy.subtree_verdicts(top, None, R, names) == expected
            assert policy.verdicts_of([f"{top}/{rel}" for rel in rels], R) == expected


def test_policy_is_immutable_after_compilation(tmp_path):
    import dataclasses

    policy = PermissionPolicy(base=tmp_path, allow=(rule("notes/**"),))
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.default_verdict = ActionVerdict.allow  # type: ignore[misc]
    assert policy.verdict("other", R) is ActionVerdict.deny
