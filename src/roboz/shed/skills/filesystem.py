"""The filesystem skill: run_file_command and apply_patch with their instructions.

The command instructions embed the option allowlist generated from the engine's own table.
"""

from __future__ import annotations

from roboz.shed.files.spec import allowlist_text
from roboz.shed.tools.context import FilesystemContext
from roboz.shed.tools.files import get_run_file_command
from roboz.shed.tools.patch import get_apply_patch
from roboz.tools import Skill, SkillFactory, Tool

COMMAND_INSTRUCTIONS = """\
## run_file_command

Files are reached only through run_file_command and apply_patch, and every path is checked
against a permission policy (read, create, delete) before anything runs. There is no shell:
nothing is expanded or interpreted except what is described here.

Write a command as one ordered array `value` of [value, tag] pairs:
CMD the command; FLG one option per token (e.g. ["-n","FLG"], bundles of switches such as
["-rn","FLG"] are fine); an option that takes a value consumes the next ARG or PTH token;
["--","FLG"] ends the options. ARG is a non-path value (a search pattern, a number, a -name
glob); PTH is a path, relative to the base directory or absolute. CTL joins commands:
&& (run the next only if the previous succeeded), || (fallback: only if it failed),
; (always), | (pipe stdout into the next command). Pipelines bind first; && and || run left
to right. Each command reached gets its own permission checks; a denied command does not run
(exit status 126) and `||` can fall back to another, separately checked command. Pipes are
buffered, and earlier file changes are not rolled back when a later command fails.

Paths: source paths may use * within a component and one recursive **/ component
(e.g. notes/**/*.md); a pattern that matches nothing is an error; ? and [..] are not supported.
Expanding a glob lists directories, so it needs read permission on them; entries you may not
read are never matched. Destinations (cp/mv last operand, tee, touch, mkdir) must be literal
paths. Symlinks are
resolved and both the written and the resolved path must be allowed. FIFOs, devices and
hard-linked files are refused. Output and run time are capped per command; when output is
cut, narrow the command.

Operand order: cp/mv SOURCE... DEST (DEST last); grep/rg PATTERN then paths (or -e PATTERN);
find START... then its expression (FLG tests with their ARG values, e.g. ["-name","FLG"],
["*.py","ARG"]); diff FILE1 FILE2; gio trash is ["gio","CMD"],["trash","ARG"],PTH...
Writing a file: tee with the text as one ARG before the destinations
([["tee","CMD"],["line 1\\n","ARG"],["notes/a.txt","PTH"]]), pipe into tee (cat a | tee b),
or use apply_patch. Permissions: reading and
listing need read; creating, writing or overwriting needs create; rm, mv (source) and gio
trash need delete.

Commands and every option allowed:
"""

PATCH_INSTRUCTIONS = """\
## apply_patch

apply_patch replaces literal text: old_string -> new_string in one file. old_string must
match exactly once; include a few surrounding lines to make it unique, or set replace_all to
change every occurrence. Matching is exact (white space, indentation, line ends); read the
file first and copy the text. An empty old_string writes new_string as the whole file,
creating it (and missing parent directories) if needed.

Patch or rewrite? Patch for targeted changes: it is cheaper, keeps everything else
byte-identical (line endings, encoding) and fails loudly when the file is not what you
expect. Rewrite the whole file (empty old_string) when creating a file, or when most of it
changes. Every write is atomic: readers see the old or the new file, never a mix.
"""


def filesystem_instructions() -> str:
    return COMMAND_INSTRUCTIONS + allowlist_text() + "\n\n" + PATCH_INSTRUCTIONS


def _build(ctx: FilesystemContext) -> list[Tool]:
    return [*get_run_file_command(ctx), *get_apply_patch(ctx)]


filesystem_skill: SkillFactory[FilesystemContext] = Skill.factory(
    name="filesystem",
    description="Read, search, create, change and delete files under a permission policy "
    "(run_file_command, apply_patch).",
    instructions=filesystem_instructions(),
    build_tools=_build,
)
