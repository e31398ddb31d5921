"""A SafeScripts run's network, as the helper reported it: the traffic through its egress
proxy and every attempt it refused, typed, so that an agent (or the tool it uses) can tell
its user which host to ask for.

Only runs whose helper profile has an allowlist (``network = {allow = [...]}``) have one;
``ShellScriptResult.network`` is None for the others.
"""

from __future__ import annotations

from dataclasses import dataclass

from roboz_helper.egress.report import POLICY_REASONS, NetworkReport, RefusalReason

__all__ = ["NetworkRefusal", "RunNetwork"]


@dataclass(frozen=True)
class NetworkRefusal:
    """Attempts to one destination that did not get through, for one reason."""

    host: str  # as the run asked for it; "" when the request never named one
    port: int  # 0 when the request never named one
    reason: RefusalReason
    rule: str  # the allowlist entry involved, "" when none matched
    detail: str
    count: int
    message: str  # e.g. "network: git.evil.example:443 is not allowed by policy 'dev'"

    @property
    def by_policy(self) -> bool:
        """Refused by the allowlist (asking for the host may help), rather than by a limit,
        a malformed request or a host that could not be reached."""
        return self.reason in POLICY_REASONS


@dataclass(frozen=True)
class RunNetwork:
    """A run's traffic through the helper's egress proxy."""

    policy: str  # the helper profile whose allowlist applied
    bytes_out: int
    bytes_in: int
    connections: int
    refused: int  # every refused attempt, counted once each
    refusals: tuple[NetworkRefusal, ...]  # the distinct ones (the helper lists at most 32)

    @classmethod
    def from_report(cls, report: NetworkReport) -> RunNetwork:
        refusals = tuple(
            NetworkRefusal(
                host=r.host,
                port=r.port,
                reason=r.reason,
                rule=r.rule,
                detail=r.detail,
                count=r.count,
                message=r.text(report.policy),
            )
            for r in report.refusals
        )
        return cls(
            policy=report.policy,
            bytes_out=report.bytes_out,
            bytes_in=report.bytes_in,
            connections=report.connections,
            refused=report.refused,
            refusals=refusals,
        )

    def summary(self) -> list[str]:
        """Lines for a report: one per refusal, and how many more were not listed."""
        lines = [r.message for r in self.refusals]
        unlisted = self.refused - sum(r.count for r in self.refusals)
        if unlisted > 0:
            lines.append(f"network: {unlisted} more refused attempts (not listed)")
        return lines
