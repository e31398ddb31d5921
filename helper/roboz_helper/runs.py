"""Turning an authorized request into a sandbox run, and its outcome into a RunCompletion."""

from __future__ import annotations

import secrets
import shlex
from typing import Any, get_args

from roboz_helper.egress.config import EgressConfig
from roboz_helper.egress.endpoint import proxy_environment
from roboz_helper.egress.proxy import EgressSession
from roboz_helper.egress.sessions import NetworkRequestError, resolver_for, session_for
from roboz_helper.file_policy import FilePolicy, FilePolicyError, check_file_policy
from roboz_helper.policy import NUMERIC_LIMITS, Profile, run_as_ids
from roboz_helper.protocol import ExecCommand, Limits, RunCompletion, RunScript
from roboz_helper.run_states import Limit, RunStatus
from roboz_helper.sandbox import SandboxOutcome, SandboxSpec

_STATUSES: frozenset[RunStatus] = frozenset(get_args(RunStatus))
_LIMITS: frozenset[Limit] = frozenset(get_args(Limit))


class RunRefused(ValueError):
    """The request is well-formed but the profile does not allow it."""


def new_run_id() -> str:
    return secrets.token_hex(8)


# What a profile limits, copied by name to the wire and to the sandbox (the names agree; a test
# holds them to it), so a new limit is added in one place.
LIMIT_FIELDS = (*NUMERIC_LIMITS, "network")


def _profile_limits(profile: Profile) -> dict[str, Any]:
    return {name: getattr(profile, name) for name in LIMIT_FIELDS}


def limits_of(profile: Profile, max_runs: int) -> Limits:
    return Limits(**_profile_limits(profile), max_runs=max_runs)


def check_args(args: list[str]) -> None:
    for arg in args:
        if "\0" in arg:
            raise RunRefused("arguments may not contain NUL bytes")


def exec_argv(profile: Profile, request: ExecCommand) -> list[str]:
    """The argv of an exec request, if its executable is on the profile's allowlist."""
    if not request.argv:
        raise RunRefused("empty argv")
    check_args(request.argv)
    # Exact string match against absolute paths: no PATH search, no basename matching.
    if request.argv[0] not in profile.commands:
        raise RunRefused(f"command not allowed by this profile: {request.argv[0]!r}")
    return list(request.argv)


def file_policies(profile: Profile, requested: FilePolicy | None) -> tuple[FilePolicy, ...]:
    """The restrictions of a run: the profile's file policy and the client's, composed (a
    path is reachable only where both allow it). The client's is checked like a policy
    file; it has nothing that could widen the profile (no paths to bind, no modes)."""
    policies = [profile.file_rules] if profile.file_rules is not None else []
    if requested is not None:
        try:
            check_file_policy(requested, "file_policy.")
        except FilePolicyError as exc:
            raise RunRefused(f"the request's {exc}") from None
        policies.append(requested)
    return tuple(policies)


def network_session(
    profile_name: str,
    profile: Profile,
    requested: tuple[str, ...] | None,
    egress: EgressConfig,
) -> EgressSession | None:
    """The egress proxy session of a run of a profile with an allowlist (narrowed to what the
    request names, never widened), None for the others."""
    if isinstance(profile.network, str):
        if requested is not None:
            raise RunRefused(
                f"the request's network_allow: profile {profile_name!r} has no allowlist "
                f"(network = {profile.network!r})"
            )
        return None
    try:
        return session_for(profile_name, profile.network, requested, resolver_for(egress), egress)
    except NetworkRequestError as exc:
        raise RunRefused(f"the request's {exc}") from None


def build_spec(
    profile: Profile,
    argv: list[str],
    script_fd: int | None,
    run_id: str,
    requested_file_policy: FilePolicy | None = None,
) -> SandboxSpec:
    """Everything the sandbox needs for one run, taken from the profile and nothing else but
    the client's file policy, which can only narrow it. A profile with an allowlist gets a
    "proxy" sandbox and the variables that point its programs at the proxy (over any of the
    profile's own env of the same names: they could not reach anything else anyway)."""
    uid, gid = run_as_ids(profile)  # raises PolicyError for root; re-checked on every run
    limits = _profile_limits(profile)
    env = dict(profile.env)
    if not isinstance(profile.network, str):
        limits["network"] = "proxy"
        env.update(proxy_environment())
    return SandboxSpec(
        argv=argv,
        script_fd=script_fd,
        uid=uid,
        gid=gid,
        workdir=profile.workdir,
        readonly_paths=tuple(profile.readonly_paths),
        writable_paths=tuple(profile.writable_paths),
        env=env,
        run_id=run_id,
        file_policies=file_policies(profile, requested_file_policy),
        **limits,
    )


def completion_of(outcome: SandboxOutcome) -> RunCompletion:
    """Map a sandbox outcome to the wire. The outcome is typed, but a value outside its
    vocabulary must still not reach strict clients (they would refuse the frame)."""
    status, diagnostic, limit = outcome.status, outcome.diagnostic, outcome.limit
    if status not in _STATUSES:
        diagnostic = f"sandbox reported unknown status {status!r}: {diagnostic}"
        status = "failed"
    return RunCompletion(
        status=status,
        exit_code=outcome.exit_code,
        signal=outcome.signal,
        diagnostic=diagnostic,
        wall_time_s=float(outcome.wall_time_s),
        cpu_time_s=float(outcome.cpu_time_s),
        peak_memory_bytes=int(outcome.peak_memory_bytes),
        limit=limit if limit in _LIMITS else None,
        network=outcome.network,
    )


def network_summary(completion: RunCompletion) -> tuple[str | None, str | None]:
    """A run's network on its log line: its traffic, and the refused attempts (host, port,
    reason; log_format bounds and escapes them). (None, None) without an allowlist."""
    report = completion.network
    if report is None:
        return None, None
    traffic = (
        f"{report.connections} connections, {report.bytes_out} bytes out, "
        f"{report.bytes_in} bytes in, {report.refused} refused"
    )
    refused = "; ".join(f"{r.host}:{r.port} {r.reason} x{r.count}" for r in report.refusals)
    return traffic, refused or None


def request_fields(request: RunScript | ExecCommand) -> dict[str, str]:
    """What a request asks to run, as log fields (log_format quotes and escapes them)."""
    if isinstance(request, RunScript):
        what = {"kind": "script", "argv": shlex.join([request.path, *request.args])}
    else:
        what = {"kind": "exec", "argv": shlex.join(request.argv)}
    if request.trace_id is not None:
        what["trace_id"] = request.trace_id
    return what
