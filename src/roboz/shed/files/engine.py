"""Running a sequence of file commands: parse, then for each reached command check every path,
run it only if all checks passed, and report what happened."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from roboz.runtime.events import EventPipe
from roboz.shed.files import fscmds, native, removal, textcmds
from roboz.shed.files.base import Invocation, Limits, Preparer
from roboz.shed.files.parser import Call, CommandSyntaxError, Step, parse_options, parse_sequence
from roboz.shed.files.process import MissingBinary, Outcome
from roboz.shed.files.report import CommandReport, FileCommandResult, render
from roboz.shed.files.tokens import Tag, Token
from roboz.shed.guard import AccessError, CommandGuard, CommandTimeout, PermissionDenied, deadline
from roboz.shed.sandbox import PermissionPolicy

DENIED_STATUS = 126
TIMEOUT_STATUS = 124
FAILED_STATUS = 2

PREPARERS: dict[str, Preparer] = {
    "pwd": textcmds.prepare_pwd,
    "cat": textcmds.prepare_cat,
    "head": textcmds.prepare_head,
    "tail": textcmds.prepare_tail,
    "wc": textcmds.prepare_wc,
    "tee": textcmds.prepare_tee,
    "touch": fscmds.prepare_touch,
    "mkdir": fscmds.prepare_mkdir,
    "cp": fscmds.prepare_cp,
    "mv": fscmds.prepare_mv,
    "rm": removal.prepare_rm,
    "grep": native.prepare_grep,
    "rg": native.prepare_rg,
    "ls": native.prepare_ls,
    "find": native.prepare_find,
    "diff": native.prepare_diff,
    "gio trash": native.prepare_gio_trash,
}

CheckedHook = Callable[[Call], None]
"""Called after a command's checks passed and before it runs (tests race against it)."""


def _decode(data: bytes) -> str:
    # Lossless: bytes that are not UTF-8 (a file name, binary content) read as \xHH.
    return data.decode("utf-8", "backslashreplace")


def parse(
    tokens: Sequence[tuple[str, str]], *, options: bool = False
) -> list[Step] | FileCommandResult:
    """The sequence's steps, or the report of its syntax error (then nothing ran).

    With ``options`` every command's options are checked as well, as the tool does before
    anything runs; the engine itself checks a command's options when it reaches it.
    """
    try:
        for token in tokens:
            # Reached from outside (MCP, a caller's own tokens): a wrong shape is a refusal.
            if not _is_token(token):
                raise CommandSyntaxError(
                    f"each token is a (value, tag) pair of strings, not {token!r}"
                )
        steps = parse_sequence([(value, Tag(tag)) for value, tag in tokens])
        if options:
            for step in steps:
                for call in step.pipeline:
                    parse_options(call)
    except (CommandSyntaxError, ValueError) as error:
        report = CommandReport(text=_shown(tokens), state="failed", reason=f"syntax: {error}")
        return FileCommandResult(
            value=render([report], FAILED_STATUS), exit_status=FAILED_STATUS, commands=[report]
        )
    return steps


def _is_token(token: object) -> bool:
    return (
        isinstance(token, tuple | list)
        and len(token) == 2  # pyright: ignore[reportUnknownArgumentType]
        and all(isinstance(part, str) for part in token)  # pyright: ignore[reportUnknownVariableType]
    )


def _shown(tokens: Sequence[object]) -> str:
    """The refused sequence as text, whatever its tokens are."""
    return " ".join(str(token[0]) if _is_token(token) else repr(token) for token in tokens)  # type: ignore[index]


class FileCommandEngine:
    """Runs ``[value, tag]`` sequences under a PermissionPolicy."""

    def __init__(
        self,
        policy: PermissionPolicy,
        *,
        pipe: EventPipe | None = None,
        limits: Limits | None = None,
        tool: str = "run_file_command",
        on_checked: CheckedHook | None = None,
    ) -> None:
        self.policy = policy
        self.pipe = pipe
        self.limits = limits or Limits()
        self.tool = tool
        self.on_checked = on_checked

    def run(self, tokens: list[Token]) -> FileCommandResult:
        steps = parse(tokens)
        if isinstance(steps, FileCommandResult):
            return steps
        reports: list[CommandReport] = []
        status = 0
        for step in steps:
            skip = (step.operator == "&&" and status != 0) or (
                step.operator == "||" and status == 0
            )
            if skip:
                why = (
                    "a previous command failed (&&)"
                    if step.operator == "&&"
                    else "a previous command succeeded (||)"
                )
                reports += [
                    CommandReport(call.text, "skipped", reason=why) for call in step.pipeline
                ]
                continue
            status = self._pipeline(step.pipeline, reports)
        return FileCommandResult(
            value=render(reports, status), exit_status=status, commands=reports
        )

    def _pipeline(self, pipeline: list[Call], reports: list[CommandReport]) -> int:
        data = b""
        status = 0
        for position, call in enumerate(pipeline):
            report, outcome = self._command(call, data, piped=position > 0)
            reports.append(report)
            if outcome is None:
                for rest in pipeline[position + 1 :]:
                    reports.append(
                        CommandReport(
                            rest.text,
                            "skipped",
                            reason="an earlier command of its pipeline did not run",
                        )
                    )
                return DENIED_STATUS if report.state == "denied" else FAILED_STATUS
            status = outcome.status
            last = position == len(pipeline) - 1
            data = outcome.stdout
            if not last:
                report.stdout = ""
        return status

    def _command(
        self, call: Call, stdin: bytes, *, piped: bool
    ) -> tuple[CommandReport, Outcome | None]:
        guard = CommandGuard(self.policy, tool=self.tool, pipe=self.pipe)
        try:
            parsed = parse_options(call)
            with deadline(self.limits.timeout):
                prepared = PREPARERS[call.name](
                    Invocation(guard, call, parsed, self.limits, piped=piped)
                )
        except PermissionDenied as error:
            return CommandReport(call.text, "denied", DENIED_STATUS, reason=str(error)), None
        except (CommandSyntaxError, AccessError, MissingBinary) as error:
            return CommandReport(call.text, "failed", FAILED_STATUS, reason=str(error)), None
        except CommandTimeout as error:
            reason = f"checking {error}; nothing ran"
            return CommandReport(call.text, "failed", FAILED_STATUS, reason=reason), None
        except OSError as error:
            return CommandReport(
                call.text, "failed", FAILED_STATUS, reason=f"{error.strerror or error}"
            ), None
        except Exception as error:  # a bug must not take the agent's whole run down
            reason = f"internal error ({type(error).__name__}); nothing ran"
            return CommandReport(call.text, "failed", FAILED_STATUS, reason=reason), None
        try:
            guard.confirm()
            if self.on_checked is not None:
                self.on_checked(call)
            with deadline(self.limits.timeout):
                outcome = prepared.run(stdin)
        except CommandTimeout as error:
            outcome = Outcome(TIMEOUT_STATUS, b"", b"", str(error))
        except PermissionDenied as error:
            return CommandReport(call.text, "denied", DENIED_STATUS, reason=str(error)), None
        except (AccessError, OSError) as error:
            # An OSError raised without an errno (by our own code) has no strerror, only text.
            reason = str(error) if isinstance(error, AccessError) else error.strerror or str(error)
            return CommandReport(call.text, "ran", 1, stderr=reason), Outcome(1, b"", b"")
        except Exception as error:  # as in the prepare stage: report it, keep the run going
            reason = (
                f"internal error ({type(error).__name__}) while running; "
                "changes made before it stay"
            )
            return CommandReport(call.text, "failed", FAILED_STATUS, reason=reason), None
        finally:
            prepared.close()
        report = CommandReport(
            call.text,
            "ran",
            outcome.status,
            stdout=_decode(outcome.stdout),
            stderr=_decode(outcome.stderr),
            reason=outcome.note,
        )
        return report, outcome


def run_file_command(
    policy: PermissionPolicy, tokens: list[Token], **options: object
) -> FileCommandResult:
    """Convenience: run one sequence with a fresh engine."""
    return FileCommandEngine(policy, **options).run(tokens)  # type: ignore[arg-type]
