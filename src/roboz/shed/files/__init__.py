"""run_file_command: guarded cp, mv, pwd, cat, head, tail, wc, tee, touch, mkdir, grep, rg, ls,
find, diff, gio trash and rm over ``[value, tag]`` token sequences."""

from roboz.shed.files.base import Limits
from roboz.shed.files.engine import FileCommandEngine, run_file_command
from roboz.shed.files.report import CommandReport, FileCommandResult
from roboz.shed.files.spec import SPECS, allowlist_text
from roboz.shed.files.tokens import FileCommandInput, Tag

__all__ = [
    "SPECS",
    "CommandReport",
    "FileCommandEngine",
    "FileCommandInput",
    "FileCommandResult",
    "Limits",
    "Tag",
    "allowlist_text",
    "run_file_command",
]
