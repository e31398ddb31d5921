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

No shell: `value` is an ordered array of [value, tag] pairs. CMD command; FLG one option or
bundled switches (["-rn","FLG"]), its value the next ARG or PTH; ["--","FLG"] ends options;
ARG other values (patterns, numbers, text); PTH paths, relative to the base or absolute;
CTL && (if the last succeeded), || (if it failed), ; or | (pipe stdout); pipelines bind
first. Create a note and count its lines:
[["mkdir","CMD"],["-p","FLG"],["notes","PTH"],["&&","CTL"],["tee","CMD"],
["line 1\\nline 2\\n","ARG"],["notes/today.txt","PTH"],["&&","CTL"],["wc","CMD"],["-l","FLG"],
["notes/today.txt","PTH"]]
Each reached command's paths are checked first: read to read, list or glob; create to write;
delete for rm, gio trash, mv sources. Denied commands do not run (status 126); || can fall
back; nothing is rolled back. Sources take * in a component and one **/ (no ? or [..]; no
match fails); destinations are literal. Symlinks resolve and both paths must be allowed;
walks never follow them; FIFOs, devices, hard links are refused. Searches without a path
search the base. Output and time are capped.

Commands and every option allowed:
"""

PATCH_INSTRUCTIONS = """\
## apply_patch

Replaces old_string, matched exactly (white space, line ends: copy it from the file), with
new_string in one file. It must match once (add surrounding lines) unless replace_all; an empty
old_string writes the whole file, creating it and its directories. Writes are atomic.

Patch or rewrite? Patch targeted changes: cheaper, the rest stays byte-identical, and it fails
if the file is not as expected. Rewrite to create a file or change most of it.
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
