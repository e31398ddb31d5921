"""The typed network result a run's completion turns into."""

from __future__ import annotations

from roboz_helper.egress.report import NetworkReport, Refusal

from roboz.shed.safe_scripts.network import RunNetwork


def test_a_report_becomes_typed_refusals_with_messages() -> None:
    report = NetworkReport(
        policy="dev",
        bytes_out=10,
        bytes_in=20,
        connections=1,
        refused=6,
        refusals=(
            Refusal(host="git.evil.example", port=443, reason="not-allowed"),
            Refusal(host="pypi.org", port=80, reason="port", detail="allowed on port 443 only",
                    count=2),
            Refusal(host="files.example.org", port=443, reason="unresolved", rule="*.example.org",
                    detail="no such name"),
        ),
    )  # fmt: skip
    network = RunNetwork.from_report(report)
    assert (network.policy, network.bytes_out, network.bytes_in, network.connections) == (
        "dev", 10, 20, 1)  # fmt: skip
    first, second, third = network.refusals
    assert first.message == "network: git.evil.example:443 is not allowed by policy 'dev'"
    assert first.by_policy and second.by_policy and not third.by_policy
    assert second.message == (
        "network: pypi.org:80 is not allowed by policy 'dev': allowed on port 443 only (2 attempts)"
    )
    assert third.message == "network: files.example.org:443 failed (unresolved): no such name"
    assert network.summary()[-1] == "network: 2 more refused attempts (not listed)"


def test_a_limit_says_which() -> None:
    report = NetworkReport(
        policy="dev",
        refused=1,
        refusals=(Refusal(host="a.example", port=443, reason="byte-limit", detail="100000 bytes"),),
    )
    (refusal,) = RunNetwork.from_report(report).refusals
    assert refusal.message == (
        "network: a.example:443 was refused: the run reached its byte limit (policy 'dev'): "
        "100000 bytes"
    )
    assert not refusal.by_policy
