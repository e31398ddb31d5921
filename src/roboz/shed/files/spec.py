"""The option allowlist of every file command: the engine parses with it, and the skill's
instructions are generated from it, so the two cannot drift apart."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

NUMBER = re.compile(r"\d+")
SIGNED = re.compile(r"[+-]?\d+")
TAIL_NUMBER = re.compile(r"\+?\d+")
FIND_SIZE = re.compile(r"[+-]?\d+[bckwMG]?")
FIND_TYPE = re.compile(r"[fdl]")


@dataclass(frozen=True)
class Option:
    names: tuple[str, ...]
    help: str
    """Only what the names do not already say (the LLM knows GNU options); often empty."""
    value: str | None = None
    """None for a switch; "ARG" or "PTH" for an option that consumes the next token."""
    check: re.Pattern[str] | None = None


@dataclass(frozen=True)
class CommandSpec:
    name: str
    usage: str
    summary: str
    options: tuple[Option, ...] = ()
    notes: tuple[str, ...] = ()
    like: str | None = None
    """A command whose identical options the instructions name only by their short form."""
    by_name: dict[str, Option] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "by_name", {name: option for option in self.options for name in option.names}
        )


def _o(
    names: str, help: str = "", value: str | None = None, check: re.Pattern[str] | None = None
) -> Option:
    return Option(tuple(names.split()), help, value, check)


SPECS: dict[str, CommandSpec] = {
    spec.name: spec
    for spec in (
        CommandSpec("pwd", "pwd", "print the base directory"),
        CommandSpec(
            "cat",
            "cat [FLG...] [PTH...]",
            "print files or stdin",
            (_o("-n --number"),),
        ),
        CommandSpec(
            "head",
            "head [FLG...] [PTH...]",
            "first 10 lines",
            (_o("-n --lines", "", "ARG", NUMBER), _o("-c --bytes", "", "ARG", NUMBER)),
        ),
        CommandSpec(
            "tail",
            "tail [FLG...] [PTH...]",
            "last 10 lines",
            (
                _o("-n --lines", "+K: from line K", "ARG", TAIL_NUMBER),
                _o("-c --bytes", "", "ARG", NUMBER),
            ),
        ),
        CommandSpec(
            "wc",
            "wc [FLG...] [PTH...]",
            "count lines, words and bytes",
            (_o("-l --lines"), _o("-w --words"), _o("-c --bytes"), _o("-m --chars")),
        ),
        CommandSpec(
            "tee",
            "tee [FLG...] [CONTENT_ARG] PTH...",
            "write stdin or the ARG's text to files and stdout",
            (_o("-a --append"),),
            ("text is written byte for byte; not with a pipe",),
        ),
        CommandSpec(
            "touch",
            "touch [FLG...] PTH...",
            "create files or update their times",
            (_o("-c --no-create"),),
        ),
        CommandSpec("mkdir", "mkdir [FLG...] PTH...", "create directories", (_o("-p --parents"),)),
        CommandSpec(
            "cp",
            "cp [FLG...] SOURCE_PTH... DEST_PTH",
            "copy",
            (_o("-r -R --recursive"), _o("-n --no-clobber")),
            ("with several sources DEST is a directory",),
        ),
        CommandSpec(
            "mv",
            "mv [FLG...] SOURCE_PTH... DEST_PTH",
            "move or rename",
            (_o("-n --no-clobber"),),
            ("within one file system",),
        ),
        CommandSpec(
            "rm",
            "rm [FLG...] PTH...",
            "remove",
            (_o("-r -R --recursive"), _o("-f --force")),
            ("never the base or its parents",),
        ),
        CommandSpec(
            "grep",
            "grep [FLG...] PATTERN_ARG [PTH...]",
            "regex search",
            (
                _o("-i --ignore-case"),
                _o("-v --invert-match"),
                _o("-n --line-number"),
                _o("-c --count"),
                _o("-l --files-with-matches"),
                _o("-L --files-without-match"),
                _o("-w --word-regexp"),
                _o("-x --line-regexp"),
                _o("-F --fixed-strings"),
                _o("-E --extended-regexp"),
                _o("-r --recursive"),
                _o("-h --no-filename"),
                _o("-H --with-filename"),
                _o("-o --only-matching"),
                _o("-s --no-messages"),
                _o("-q --quiet"),
                _o("-e --regexp", "repeatable, replaces PATTERN", "ARG"),
                _o("-f --file", "patterns; needs read", "PTH"),
                _o("-m --max-count", "", "ARG", NUMBER),
                _o("-A --after-context", "", "ARG", NUMBER),
                _o("-B --before-context", "", "ARG", NUMBER),
                _o("-C --context", "", "ARG", NUMBER),
                _o("--include", "", "ARG"),
                _o("--exclude", "", "ARG"),
                _o("--exclude-dir", "", "ARG"),
            ),
            (),
        ),
        CommandSpec(
            "rg",
            "rg [FLG...] PATTERN_ARG [PTH...]",
            "ripgrep",
            (
                _o("-i --ignore-case"),
                _o("-S --smart-case"),
                _o("-s --case-sensitive"),
                _o("-v --invert-match"),
                _o("-n --line-number"),
                _o("-N --no-line-number"),
                _o("-c --count"),
                _o("-l --files-with-matches"),
                _o("-w --word-regexp"),
                _o("-x --line-regexp"),
                _o("-F --fixed-strings"),
                _o("-o --only-matching"),
                _o("--hidden"),
                _o("--no-ignore"),
                _o("--files", "list files, no PATTERN"),
                _o("-e --regexp", "repeatable", "ARG"),
                _o("-g --glob", "!GLOB excludes", "ARG"),
                _o("-t --type", "e.g. py", "ARG"),
                _o("-T --type-not", "", "ARG"),
                _o("-m --max-count", "", "ARG", NUMBER),
                _o("-A --after-context", "", "ARG", NUMBER),
                _o("-B --before-context", "", "ARG", NUMBER),
                _o("-C --context", "", "ARG", NUMBER),
            ),
            ("no --pre or -z",),
            like="grep",
        ),
        CommandSpec(
            "ls",
            "ls [FLG...] [PTH...]",
            "list",
            (
                _o("-l", "long"),
                _o("-a --all"),
                _o("-A --almost-all"),
                _o("-h --human-readable"),
                _o("-R --recursive"),
                _o("-1", "one per line"),
                _o("-t", "by time"),
                _o("-S", "by size"),
                _o("-r --reverse"),
                _o("-d --directory"),
                _o("-F --classify"),
            ),
        ),
        CommandSpec(
            "find",
            "find [START_PTH...] [EXPRESSION FLG/ARG...]",
            "find files",
            (
                _o("-name", "GLOB", "ARG"),
                _o("-iname", "", "ARG"),
                _o("-path", "", "ARG"),
                _o("-ipath", "", "ARG"),
                _o("-type", "f, d or l", "ARG", FIND_TYPE),
                _o("-maxdepth", "", "ARG", NUMBER),
                _o("-mindepth", "", "ARG", NUMBER),
                _o("-size", "e.g. +10k", "ARG", FIND_SIZE),
                _o("-mtime", "days, +N/-N", "ARG", SIGNED),
                _o("-mmin", "minutes", "ARG", SIGNED),
                _o("-newer", "needs read", "PTH"),
                _o("-empty"),
                _o("-print"),
                _o("-print0"),
                _o("-not !"),
                _o("-a -and"),
                _o("-o -or"),
                _o("( )", "grouping"),
            ),
            ("start paths first; tests are FLG, their values ARG; no -exec, -delete or -L",),
        ),
        CommandSpec(
            "diff",
            "diff [FLG...] PTH PTH",
            "compare two files (directories with -r)",
            (
                _o("-u --unified"),
                _o("-U", "context lines", "ARG", NUMBER),
                _o("-q --brief"),
                _o("-r --recursive"),
                _o("-N --new-file"),
                _o("-i --ignore-case"),
                _o("-w --ignore-all-space"),
                _o("-b --ignore-space-change"),
                _o("-B --ignore-blank-lines"),
            ),
        ),
        CommandSpec(
            "gio trash",
            "gio trash [FLG...] PTH...",
            "move to the trash",
            (_o("-f --force"),),
            ('written ["gio","CMD"],["trash","ARG"]',),
        ),
    )
}

CONTROL_OPERATORS = ("&&", "||", ";", "|")


def allowlist_text() -> str:
    """The full option allowlist, one line per command (for the skill's instructions):
    ``usage: summary; option, option (help); note``."""
    lines: list[str] = []
    for spec in SPECS.values():
        same: set[Option] = set(SPECS[spec.like].options) if spec.like else set()
        shared = [option.names[0] for option in spec.options if option in same]
        options = [f"{spec.like}'s {' '.join(shared)}"] if shared else []
        for option in spec.options:
            if option in same:
                continue
            text = " ".join(option.names) + (f" {option.value}" if option.value else "")
            options.append(text + (f" ({option.help})" if option.help else ""))
        parts = [f"{spec.usage}: {spec.summary}", *([", ".join(options)] if options else [])]
        lines.append("; ".join([*parts, *spec.notes]))
    return "\n".join(lines)
