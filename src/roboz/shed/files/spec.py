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
    by_name: dict[str, Option] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "by_name", {name: option for option in self.options for name in option.names}
        )


def _o(
    names: str, help: str, value: str | None = None, check: re.Pattern[str] | None = None
) -> Option:
    return Option(tuple(names.split()), help, value, check)


SPECS: dict[str, CommandSpec] = {
    spec.name: spec
    for spec in (
        CommandSpec("pwd", "pwd", "print the base directory"),
        CommandSpec(
            "cat",
            "cat [FLG...] [PTH...]",
            "print files (or the piped input)",
            (_o("-n --number", "number all lines"),),
        ),
        CommandSpec(
            "head",
            "head [FLG...] [PTH...]",
            "first lines (default 10)",
            (
                _o("-n --lines", "number of lines", "ARG", NUMBER),
                _o("-c --bytes", "number of bytes", "ARG", NUMBER),
            ),
        ),
        CommandSpec(
            "tail",
            "tail [FLG...] [PTH...]",
            "last lines (default 10); -n +K starts at line K",
            (
                _o("-n --lines", "number of lines (+K: from line K)", "ARG", TAIL_NUMBER),
                _o("-c --bytes", "number of bytes", "ARG", NUMBER),
            ),
        ),
        CommandSpec(
            "wc",
            "wc [FLG...] [PTH...]",
            "count lines, words, bytes",
            (
                _o("-l --lines", "lines"),
                _o("-w --words", "words"),
                _o("-c --bytes", "bytes"),
                _o("-m --chars", "characters"),
            ),
        ),
        CommandSpec(
            "tee",
            "tee [FLG...] [CONTENT_ARG] PTH...",
            "write the piped input, or one ARG's text, to files and to stdout",
            (_o("-a --append", "append instead of overwriting"),),
            (
                "the text is written byte for byte (no newline added); with a pipe the piped "
                "input is written and an ARG is an error; destinations are literal paths",
            ),
        ),
        CommandSpec(
            "touch",
            "touch [FLG...] PTH...",
            "create empty files or update their times",
            (_o("-c --no-create", "do not create missing files"),),
            ("paths are literal (no globs)",),
        ),
        CommandSpec(
            "mkdir",
            "mkdir [FLG...] PTH...",
            "create directories",
            (_o("-p --parents", "create missing parents, no error if existing"),),
            ("paths are literal (no globs)",),
        ),
        CommandSpec(
            "cp",
            "cp [FLG...] SOURCE_PTH... DEST_PTH",
            "copy files (directories with -r)",
            (
                _o("-r -R --recursive", "copy directories recursively"),
                _o("-n --no-clobber", "do not overwrite existing files"),
            ),
            (
                "the last PTH is the destination and must be literal; with several sources it "
                "must be an existing directory",
            ),
        ),
        CommandSpec(
            "mv",
            "mv [FLG...] SOURCE_PTH... DEST_PTH",
            "move or rename",
            (_o("-n --no-clobber", "do not overwrite existing files"),),
            (
                "the last PTH is the destination and must be literal; moves within one file "
                "system only",
            ),
        ),
        CommandSpec(
            "rm",
            "rm [FLG...] PTH...",
            "remove files (directories with -r)",
            (
                _o("-r -R --recursive", "remove directories and their contents"),
                _o("-f --force", "ignore missing files"),
            ),
            ("the base directory and its parents can never be removed",),
        ),
        CommandSpec(
            "grep",
            "grep [FLG...] PATTERN_ARG [PTH...]",
            "search text with regular expressions",
            (
                _o("-i --ignore-case", "ignore case"),
                _o("-v --invert-match", "non-matching lines"),
                _o("-n --line-number", "line numbers"),
                _o("-c --count", "count matching lines"),
                _o("-l --files-with-matches", "names of matching files"),
                _o("-L --files-without-match", "names of non-matching files"),
                _o("-w --word-regexp", "whole words"),
                _o("-x --line-regexp", "whole lines"),
                _o("-F --fixed-strings", "literal pattern"),
                _o("-E --extended-regexp", "ERE"),
                _o("-r --recursive", "search directories (symlinks inside are not followed)"),
                _o("-h --no-filename", "no file names"),
                _o("-H --with-filename", "file names"),
                _o("-o --only-matching", "only the matches"),
                _o("-s --no-messages", "quiet errors"),
                _o("-q --quiet", "exit status only"),
                _o("-e --regexp", "pattern (repeatable; then no PATTERN operand)", "ARG"),
                _o("-f --file", "read patterns from a file (checked for read)", "PTH"),
                _o("-m --max-count", "stop after NUM matches per file", "ARG", NUMBER),
                _o("-A --after-context", "lines after", "ARG", NUMBER),
                _o("-B --before-context", "lines before", "ARG", NUMBER),
                _o("-C --context", "lines around", "ARG", NUMBER),
                _o("--include", "only files matching GLOB", "ARG"),
                _o("--exclude", "skip files matching GLOB", "ARG"),
                _o("--exclude-dir", "skip directories matching GLOB", "ARG"),
            ),
            ("with -r and no PTH the base directory is searched",),
        ),
        CommandSpec(
            "rg",
            "rg [FLG...] PATTERN_ARG [PTH...]",
            "ripgrep: fast recursive search",
            (
                _o("-i --ignore-case", "ignore case"),
                _o("-S --smart-case", "smart case"),
                _o("-s --case-sensitive", "case sensitive"),
                _o("-v --invert-match", "invert"),
                _o("-n --line-number", "line numbers"),
                _o("-N --no-line-number", "none"),
                _o("-c --count", "count matching lines"),
                _o("-l --files-with-matches", "names"),
                _o("-w --word-regexp", "whole words"),
                _o("-x --line-regexp", "whole lines"),
                _o("-F --fixed-strings", "literal pattern"),
                _o("-o --only-matching", "matches"),
                _o("--hidden", "search hidden files"),
                _o("--no-ignore", "ignore .gitignore"),
                _o("--files", "list the files that would be searched (no PATTERN)"),
                _o("-e --regexp", "pattern (repeatable)", "ARG"),
                _o("-g --glob", "include/exclude GLOB (!GLOB excludes)", "ARG"),
                _o("-t --type", "only this file type (py, md...)", "ARG"),
                _o("-T --type-not", "exclude this file type", "ARG"),
                _o("-m --max-count", "matches per file", "ARG", NUMBER),
                _o("-A --after-context", "lines after", "ARG", NUMBER),
                _o("-B --before-context", "lines before", "ARG", NUMBER),
                _o("-C --context", "lines around", "ARG", NUMBER),
            ),
            (
                "symlinks are not followed; --pre, --pre-glob and -z are not available",
                "with no PTH the base directory is searched",
            ),
        ),
        CommandSpec(
            "ls",
            "ls [FLG...] [PTH...]",
            "list directories",
            (
                _o("-l", "long format"),
                _o("-a --all", "include . entries"),
                _o("-A --almost-all", "hidden, without . and .."),
                _o("-h --human-readable", "sizes like 1K"),
                _o("-R --recursive", "recursive"),
                _o("-1", "one per line"),
                _o("-t", "sort by time"),
                _o("-S", "sort by size"),
                _o("-r --reverse", "reverse order"),
                _o("-d --directory", "directories themselves"),
                _o("-F --classify", "append / to directories"),
            ),
        ),
        CommandSpec(
            "find",
            "find [START_PTH...] [EXPRESSION FLG/ARG...]",
            "find files by name/type/size",
            (
                _o("-name", "base name matches GLOB", "ARG"),
                _o("-iname", "like -name, ignoring case", "ARG"),
                _o("-path", "path matches GLOB", "ARG"),
                _o("-ipath", "like -path", "ARG"),
                _o("-type", "f file, d directory, l symlink", "ARG", FIND_TYPE),
                _o("-maxdepth", "descend at most N levels", "ARG", NUMBER),
                _o("-mindepth", "skip the first N levels", "ARG", NUMBER),
                _o("-size", "size, e.g. +10k", "ARG", FIND_SIZE),
                _o("-mtime", "modified N days ago (+N/-N)", "ARG", SIGNED),
                _o("-mmin", "modified N minutes ago (+N/-N)", "ARG", SIGNED),
                _o("-newer", "newer than this file (checked for read)", "PTH"),
                _o("-empty", "empty files and directories"),
                _o("-print", "print (default)"),
                _o("-print0", "NUL-separated"),
                _o("-not !", "negate the next test"),
                _o("-a -and", "and (default)"),
                _o("-o -or", "or"),
                _o("( )", "grouping (tag FLG)"),
            ),
            (
                "start paths come first; symlinks are not followed; -exec, -execdir, -ok, -okdir, "
                "-delete, -fprint, -fprint0, -fprintf, -fls, -L and -follow are not available",
                "with no START_PTH the base directory is searched",
            ),
        ),
        CommandSpec(
            "diff",
            "diff [FLG...] PTH PTH",
            "compare two files (or two directories with -r)",
            (
                _o("-u --unified", "unified format"),
                _o("-U", "unified format with N lines of context", "ARG", NUMBER),
                _o("-q --brief", "only whether they differ"),
                _o("-r --recursive", "directories"),
                _o("-N --new-file", "absent files as empty"),
                _o("-i --ignore-case", "ignore case"),
                _o("-w --ignore-all-space", "ignore white space"),
                _o("-b --ignore-space-change", "ignore changes in amount of white space"),
                _o("-B --ignore-blank-lines", "ignore blank lines"),
            ),
            ("both operands are files or both are directories; symlinks inside are not followed",),
        ),
        CommandSpec(
            "gio trash",
            "gio trash [FLG...] PTH...",
            "move files or directories to the trash",
            (_o("-f --force", "ignore missing files"),),
            ('write it as ["gio", "CMD"], ["trash", "ARG"]; needs DELETE on everything trashed',),
        ),
    )
}

CONTROL_OPERATORS = ("&&", "||", ";", "|")


def allowlist_text() -> str:
    """The full option allowlist, one block per command (for the skill's instructions)."""
    blocks = []
    for spec in SPECS.values():
        lines = [f"{spec.usage}: {spec.summary}"]
        for option in spec.options:
            value = f" {option.value}" if option.value else ""
            lines.append(f"  {' / '.join(option.names)}{value}: {option.help}")
        for note in spec.notes:
            lines.append(f"  note: {note}")
        blocks.append("\n".join(lines))
    return "\n".join(blocks)
