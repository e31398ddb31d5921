"""Prose deltas from a JSON action however it is split into pieces."""

from __future__ import annotations

import json
import random

import pytest

from roboz.runtime.prose import ProseStream

ACTION = {
    "action": "stop",
    "rationale": 'Because "quotes", a \\ backslash,\na newline, é and 😀',
    "nested": {"a": ['x"]}', 1], "b": "}"},
    "number": 12.5,
    "flag": True,
    "value": "final answer 😀 done",
    "nothing": None,
}
EXPECTED = {
    "rationale": ACTION["rationale"],
    "value": ACTION["value"],
}


def _run(pieces: list[str]) -> tuple[str, dict[str, str]]:
    stream = ProseStream()
    fields: dict[str, str] = {}
    for piece in pieces:
        for field, text in stream.feed(piece):
            fields[field] = fields.get(field, "") + text
    return stream.action, fields


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(ACTION),  # \u escapes, surrogate pairs included
        json.dumps(ACTION, ensure_ascii=False),
        "```json\n" + json.dumps(ACTION, indent=2) + "\n```",
    ],
    ids=["ascii", "utf8", "fenced"],
)
def test_every_split_gives_the_decoded_text_fields(text: str) -> None:
    rng = random.Random(7)
    splits = [[text], list(text)]
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(text)), rng.randint(1, 30)))
        splits.append([text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)])
    for pieces in splits:
        assert _run(pieces) == ("stop", EXPECTED)


def test_text_that_is_not_json_yields_nothing() -> None:
    assert _run(["I think ", "we should stop"]) == ("", {})


def test_a_lone_surrogate_escape_becomes_a_replacement_character() -> None:
    assert _run(['{"action": "x", "value": "a\\ud800b"}'])[1] == {"value": "a\ufffdb"}
