"""grep, rg, find, ls, diff and gio trash: the native programs, run on pinned paths.

Every path operand is checked, pinned, and handed to the program as ``/proc/self/fd/N`` (an
inherited O_PATH descriptor), which the program cannot re-resolve to anywhere else. Values are
always passed after their option or after ``--``, so nothing can smuggle in an option. Output
mentioning ``/proc/self/fd/N`` is rewritten back to the path the command was given.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from roboz.shed.files.base import Invocation, Prepared
from roboz.shed.files.parser import CommandSyntaxError
from roboz.shed.files.process import Outcome, find_binary, run_binary
from roboz.shed.files.removal import pin_for_removal, same_entry
from roboz.shed.files.tokens import Tag
from roboz.shed.guard import (
    AccessError,
    PermissionDenied,
    Pinned,
    check_subtree,
    require_regular,
    require_regular_or_dir,
)
from roboz.shed.models import ActionVerdict, Operation


def _rewrite(data: bytes, names: dict[int, str], dotted: frozenset[int] = frozenset()) -> bytes:
    if b"/proc/self/fd/" not in data:
        return data
    for fd in dotted:  # directories given as /proc/self/fd/N/. (see prepare_diff)
        shown = os.fsencode(names[fd])
        data = data.replace(b"/proc/self/fd/%d/./" % fd, shown + b"/")
        literal = shown.replace(b"\\", b"\\\\")  # re.sub treats backslashes specially
        data = re.sub(rb"/proc/self/fd/%d/\.(?=[:\s]|$)" % fd, literal, data)
    # Longest descriptor numbers first, so /proc/self/fd/31 is not read as fd 3 + "1".
    for fd in sorted(names, key=lambda number: -len(str(number))):
        data = data.replace(b"/proc/self/fd/%d" % fd, os.fsencode(names[fd]))
    return data


class _Paths:
    """Pinned operands of one native command and how to show them."""

    def __init__(self, inv: Invocation) -> None:
        self.inv = inv
        self.pinned: list[Pinned] = []
        self.names: dict[int, str] = {}
        self.dotted: set[int] = set()

    def add(self, display: str, *, recursive: bool, content: bool, listing: bool) -> str:
        """Check and pin a READ operand; return the argument to give the program."""
        guard = self.inv.guard
        item = guard.pin(Operation.READ, display)
        self.pinned.append(item)
        require_regular_or_dir(item, display)
        if item.is_dir and recursive:
            check_subtree(guard, item, display, (Operation.READ,), reads_content=content)
        elif item.is_dir and listing:
            _check_children(self.inv, item, display)
        assert item.fd is not None
        self.names[item.fd] = display
        return item.proc_path

    def add_file(self, display: str) -> str:
        item = self.inv.guard.pin(Operation.READ, display)
        self.pinned.append(item)
        require_regular(item, display)
        assert item.fd is not None
        self.names[item.fd] = display
        return item.proc_path

    def fds(self) -> tuple[int, ...]:
        return tuple(item.fd for item in self.pinned if item.fd is not None)

    def close(self) -> None:
        for item in self.pinned:
            item.close()


def _check_children(inv: Invocation, item: Pinned, display: str) -> None:
    policy = inv.guard.policy
    if policy.verdicts_below(item.physical, Operation.READ) == frozenset({ActionVerdict.allow}):
        return
    for name in os.listdir(item.proc_path):
        if policy.decide(f"{item.physical}/{name}", Operation.READ) is not ActionVerdict.allow:
            raise PermissionDenied(
                f"read {display}: the listing would include paths the policy does not allow; "
                "list a narrower path"
            )


def inline(option_names: tuple[str, ...], value: str) -> str:
    """One argument holding option and value (``--glob=V``, ``-UV``).

    Never two arguments: parsers such as ripgrep's read a separate value that starts with
    ``-`` as the next option (``-t --pre=prog`` would set --pre), so a value could smuggle in
    an option.
    """
    long = next((name for name in option_names if name.startswith("--")), None)
    return f"{long}={value}" if long is not None else f"{option_names[0]}{value}"


def _flags(inv: Invocation, skip: tuple[str, ...] = ()) -> list[str]:
    argv: list[str] = []
    spec = inv.call.spec
    for name, values in inv.parsed.options.items():
        if name in skip:
            continue
        option = spec.by_name[name]
        if option.value is None:
            argv.append(name)
        else:
            argv += [inline(option.names, value) for value in values]
    return argv


def _prepared(
    inv: Invocation,
    paths: _Paths,
    build: Callable[[], list[str]],
    binary: str,
    *,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
) -> Prepared:
    def run(stdin: bytes) -> Outcome:
        argv = [binary, *build()]
        outcome = run_binary(
            argv,
            stdin=stdin,
            pass_fds=paths.fds(),
            timeout=inv.limits.timeout,
            output_limit=inv.limits.output_limit,
            cwd=cwd,
            env=env,
        )
        dotted = frozenset(paths.dotted)
        outcome.stdout = _rewrite(outcome.stdout, paths.names, dotted)
        outcome.stderr = _rewrite(outcome.stderr, paths.names, dotted)
        return outcome

    return Prepared(run, paths.pinned)


def _guarded(inv: Invocation, prepare: Callable[[_Paths], Prepared]) -> Prepared:
    paths = _Paths(inv)
    try:
        return prepare(paths)
    except Exception:
        paths.close()
        raise


def _pattern_and_paths(inv: Invocation, *, needs_pattern: bool) -> tuple[list[str], list[str]]:
    operands = list(inv.parsed.operands)
    patterns: list[str] = []
    if needs_pattern:
        if not operands:
            raise CommandSyntaxError(f"{inv.name}: needs a PATTERN (ARG)")
        value, tag = operands.pop(0)
        if tag is not Tag.ARG:
            raise CommandSyntaxError(f"{inv.name}: the pattern {value!r} is a value; tag it ARG")
        patterns = [f"--regexp={value}"]
    return patterns, inv.paths(operands, glob=True)


def prepare_grep(inv: Invocation) -> Prepared:
    binary = find_binary("grep")
    recursive = inv.parsed.has("-r")
    pattern, displays = _pattern_and_paths(
        inv, needs_pattern=not (inv.parsed.has("-e") or inv.parsed.has("-f"))
    )
    if recursive and not displays:
        displays = ["."]

    def prepare(paths: _Paths) -> Prepared:
        pattern_files = [paths.add_file(d) for d in inv.parsed.options.get("-f", [])]
        args = [paths.add(d, recursive=recursive, content=True, listing=False) for d in displays]
        extra = [f"--file={f}" for f in pattern_files]
        return _prepared(
            inv,
            paths,
            lambda: ["--color=never", *_flags(inv, skip=("-f",)), *extra, *pattern, "--", *args],
            binary,
        )

    return _guarded(inv, prepare)


def prepare_rg(inv: Invocation) -> Prepared:
    binary = find_binary("rg")
    files_mode = inv.parsed.has("--files")
    pattern, displays = _pattern_and_paths(
        inv, needs_pattern=not (files_mode or inv.parsed.has("-e"))
    )
    if not displays and not (inv.piped and not files_mode):
        displays = ["."]

    def prepare(paths: _Paths) -> Prepared:
        args = [paths.add(d, recursive=True, content=True, listing=False) for d in displays]
        return _prepared(
            inv,
            paths,
            lambda: [
                "--no-config",
                "--color=never",
                "--no-follow",
                *_flags(inv),
                *pattern,
                "--",
                *args,
            ],
            binary,
        )

    return _guarded(inv, prepare)


def prepare_ls(inv: Invocation) -> Prepared:
    binary = find_binary("ls")
    displays = inv.paths(glob=True) or ["."]
    recursive = inv.parsed.has("-R")
    directory_only = inv.parsed.has("-d")

    def prepare(paths: _Paths) -> Prepared:
        args = [
            paths.add(d, recursive=recursive, content=False, listing=not directory_only)
            for d in displays
        ]
        return _prepared(
            inv,
            paths,
            lambda: ["--color=never", "--dereference-command-line", *_flags(inv), "--", *args],
            binary,
        )

    return _guarded(inv, prepare)


def prepare_diff(inv: Invocation) -> Prepared:
    binary = find_binary("diff")
    displays = inv.paths(glob=True)
    if len(displays) != 2:
        raise CommandSyntaxError("diff: needs exactly two PTH operands")
    recursive = inv.parsed.has("-r")

    def prepare(paths: _Paths) -> Prepared:
        args = [paths.add(d, recursive=recursive, content=True, listing=False) for d in displays]
        first, second = paths.pinned
        if first.is_dir != second.is_dir:
            raise AccessError("diff: compare two files or two directories")
        if first.is_dir and not recursive:
            raise AccessError("diff: comparing directories needs -r")
        extra = []
        if first.is_dir:
            # --no-dereference keeps diff from following symlinks inside the trees; the
            # operands themselves are magic links, so they are given as DIR/. (a directory).
            extra = ["--no-dereference"]
            args = [f"{arg}/." for arg in args]
            paths.dotted.update(fd for item in paths.pinned if (fd := item.fd) is not None)
        return _prepared(inv, paths, lambda: [*_flags(inv), *extra, "--", *args], binary)

    return _guarded(inv, prepare)


def prepare_find(inv: Invocation) -> Prepared:
    binary = find_binary("find")
    spec = inv.call.spec
    args = list(inv.call.args)
    starts: list[str] = []
    while args and args[0][1] is not Tag.FLG:
        value, tag = args.pop(0)
        if tag is not Tag.PTH:
            raise CommandSyntaxError(
                f"find: start paths come first and are PTH; {value!r} is not (expressions use "
                "FLG tokens such as -name, each followed by its ARG)"
            )
        starts.append(value)
    displays = inv.paths([(s, Tag.PTH) for s in starts], glob=True) or ["."]

    def prepare(paths: _Paths) -> Prepared:
        roots = [paths.add(d, recursive=True, content=False, listing=False) for d in displays]
        expression: list[str] = []
        index = 0
        while index < len(args):
            value, tag = args[index]
            index += 1
            option = spec.by_name.get(value) if tag is Tag.FLG else None
            if option is None:
                raise CommandSyntaxError(
                    f"find: {value!r} is not an allowed expression token (allowed: "
                    + ", ".join(name for o in spec.options for name in o.names)
                    + ")"
                )
            expression.append(value)
            if option.value is None:
                continue
            if index >= len(args) or args[index][1] not in (Tag.ARG, Tag.PTH):
                raise CommandSyntaxError(f"find: {value} needs a value in the next token")
            operand, operand_tag = args[index]
            index += 1
            if option.value == "PTH":
                if operand_tag is not Tag.PTH:
                    raise CommandSyntaxError(f"find: the value of {value} is a path; tag it PTH")
                expression.append(paths.add_file(operand))
                continue
            if option.check is not None and not option.check.fullmatch(operand):
                raise CommandSyntaxError(f"find: invalid value {operand!r} for {value}")
            expression.append(operand)
        return _prepared(inv, paths, lambda: ["-H", *roots, *expression], binary)

    return _guarded(inv, prepare)


def prepare_gio_trash(inv: Invocation) -> Prepared:
    binary = find_binary("gio")
    force = inv.parsed.has("-f")
    displays = inv.paths(glob=True)
    if not displays:
        raise CommandSyntaxError("gio trash: needs at least one PTH")
    # Trashing a directory moves it whole, so it needs DELETE on the subtree like rm -r.
    jobs = pin_for_removal(
        inv, displays, command="gio trash", force=force, recursive=True, check_file=require_regular
    )
    env = {key: os.environ[key] for key in ("HOME", "XDG_DATA_HOME") if key in os.environ}

    def run(stdin: bytes) -> Outcome:
        status, out, err = 0, b"", b""
        for display, item in jobs:
            if item.st is None:
                continue
            if not same_entry(item):
                status, err = 1, err + os.fsencode(f"gio trash: {display}: changed since checked\n")
                continue
            outcome = run_binary(
                [binary, "trash", *(["-f"] if force else []), "--", item.name],
                stdin=b"",
                pass_fds=(item.parent_fd,),
                timeout=inv.limits.timeout,
                output_limit=inv.limits.output_limit,
                cwd=f"/proc/self/fd/{item.parent_fd}",
                env=env,
            )
            out += outcome.stdout
            err += outcome.stderr
            status = status or outcome.status
        return Outcome(status, out, err)

    return Prepared(run, [item for _, item in jobs])
