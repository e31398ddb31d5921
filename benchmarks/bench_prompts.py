"""Prompt cost of the bundled skills: what loading each one adds to every LLM call.

Run: .venv/bin/python -m benchmarks bench_prompts

For each skill in roboz.shed.skills: the estimated tokens of its instructions, and of its
instructions together with the instructions of the tools it brings (the tools' docstrings
are in the prompt too). Tokens are estimated as the mock endpoint does, about four characters
a token (``ceil(chars / 4)``): no tokenizer is a dependency, and the figure is for comparing
versions, not for billing. Target: the filesystem skill's instructions at most half of the
2,267 estimated tokens they cost before they were compacted (<= 1,133).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import roboz.shed.skills as bundled
from roboz.shed.sandbox import PermissionPolicy
from roboz.shed.skills import FilesystemContext, PdfContext
from roboz.tools import Skill, SkillFactory

BEFORE_FILESYSTEM_TOKENS = 2_267


def estimate_tokens(text: str) -> int:
    """About four characters a token, rounded up (the mock endpoint's estimate)."""
    return (len(text) + 3) // 4


def bundled_skills(policy: PermissionPolicy) -> list[Skill]:
    """Every skill roboz.shed.skills offers, built with a context for ``policy``."""
    contexts = {
        "filesystem": FilesystemContext(permissions=policy),
        "pdf": PdfContext(permissions=policy),
    }
    skills = []
    for name in bundled.__all__:
        value = getattr(bundled, name)
        if isinstance(value, SkillFactory):
            skills.append(value(contexts[value.name]))
        elif isinstance(value, Skill):
            skills.append(value)
    return skills


def main() -> None:
    print("estimated tokens (ceil(chars / 4)), per bundled skill")
    with tempfile.TemporaryDirectory() as base:
        for skill in bundled_skills(PermissionPolicy(base=Path(base))):
            own = estimate_tokens(skill.instructions)
            tools = sum(estimate_tokens(tool.instruction) for tool in skill.tools)
            line = (
                f"skill {skill.name:<12} instructions {own:>5} tokens "
                f"({len(skill.instructions)} chars); with its tools' instructions {own + tools:>5}"
            )
            if skill.name == "filesystem":
                line += f"  ratio to before {own / BEFORE_FILESYSTEM_TOKENS:.2f}x (target <= 0.50x)"
            print(line)


if __name__ == "__main__":
    main()
