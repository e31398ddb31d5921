"""A profile's `network = {allow = [...]}` and the `[egress]` table: decoding, validation with
field paths, and what `roboz-helper check-policy` shows per client."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from roboz_helper.egress.allowlist import NetworkAllow
from roboz_helper.egress.config import EgressConfig, allowlist_of
from roboz_helper.policy import PolicyError, parse_policy

HEAD = """
[[clients]]
uid = 1000
profile = "dev"

[[clients]]
group = "nogroup"
profile = "ci"

[profiles.ci]
run_as_user = "nobody"
scripts_dir = "/srv/scripts"
workdir = "/srv/work"
"""


def _policy(network: str, egress: str = "") -> str:
    return (
        egress
        + HEAD
        + f"""
[profiles.dev]
run_as_user = "nobody"
scripts_dir = "/srv/scripts"
workdir = "/srv/work"
network = {network}
"""
    )


def _error(text: str) -> str:
    with pytest.raises(PolicyError) as info:
        parse_policy(text, look_up_names=False)
    return str(info.value)


def test_an_allowlist_decodes_and_keeps_its_order() -> None:
    policy = parse_policy(
        _policy('{allow = ["pypi.org:443", "*.githubusercontent.com", "10.0.0.0/8:22"], '
                "max_bytes = 1000000}"),
        look_up_names=False,
    )  # fmt: skip
    network = policy.profiles["dev"].network
    assert isinstance(network, NetworkAllow)
    assert [str(e) for e in allowlist_of(network).entries] == [
        "pypi.org:443",
        "*.githubusercontent.com",
        "10.0.0.0/8:22",
    ]
    assert (network.max_bytes, network.max_connections) == (1000000, 64)
    assert policy.profiles["ci"].network == "none"
    assert policy.egress == EgressConfig()


@pytest.mark.parametrize(
    ("network", "error"),
    [
        ('"wifi"', "profiles.dev.network: Invalid enum value 'wifi'"),
        ("5", 'profiles.dev.network: Expected `str | object`, got `int` (network is "none", '),
        ("{}", "profiles.dev.network: Object missing required field `allow`"),
        (
            '{allow = ["a.example"], proxy = 1}',
            "profiles.dev.network: Object contains unknown field `proxy`",
        ),
        ('{allow = ["a.example", 3]}', "profiles.dev.network.allow[1]: Expected `str`, got `int`"),
        (
            "{allow = []}",
            'profiles.dev.network.allow: empty; write network = "none" for no network',
        ),
        (
            '{allow = ["pypi.org", "https://files.pythonhosted.org"]}',
            "profiles.dev.network.allow[1]: 'https://files.pythonhosted.org': write a host name "
            "with an optional port, not a URL",
        ),
        (
            '{allow = ["a.example", "*.com"]}',
            "profiles.dev.network.allow[1]: '*.com': a wildcard needs",
        ),
        ('{allow = ["127.1"]}', "profiles.dev.network.allow[0]: '127.1' is not an IP address"),
        (
            '{allow = ["a.example:99999"]}',
            "profiles.dev.network.allow[0]: port 99999 is not within",
        ),
        (
            '{allow = ["a.example", "A.example."]}',
            "profiles.dev.network.allow[1]: 'A.example.' repeats entry [0]",
        ),
        (
            '{allow = ["a.example"], max_bytes = 0}',
            "profiles.dev.network.max_bytes: must be within 1..4611686018427387904, got 0",
        ),
        (
            '{allow = ["a.example"], max_connections = 0}',
            "profiles.dev.network.max_connections: must be within 1..4096",
        ),
        (
            '{allow = ["a.example"], max_connections = 5000}',
            "profiles.dev.network.max_connections: must be within",
        ),
    ],
)
def test_bad_networks_name_the_field(network: str, error: str) -> None:
    assert _error(_policy(network)).startswith(error)


@pytest.mark.parametrize(
    ("egress", "error"),
    [
        (
            '[egress]\nnameservers = ["dns.example"]\n',
            "egress.nameservers[0]: 'dns.example': a name server is an IP address",
        ),
        (
            '[egress]\nnameservers = ["10.0.0.0/8"]\n',
            "egress.nameservers[0]: '10.0.0.0/8': a name server is an IP address",
        ),
        ('[egress]\nnameservers = ["0.0.0.0"]\n', "egress.nameservers[0]: '0.0.0.0': unspecified"),
        (
            "[egress]\nresolve_timeout_s = 0\n",
            "egress.resolve_timeout_s: must be a positive number",
        ),
        (
            "[egress]\nconnect_timeout_s = -1.0\n",
            "egress.connect_timeout_s: must be a positive number",
        ),
        ("[egress]\nresolver = 1\n", "egress: Object contains unknown field `resolver`"),
    ],
)
def test_bad_egress_tables_name_the_field(egress: str, error: str) -> None:
    assert _error(_policy('"none"', egress)).startswith(error)


def test_name_servers_with_and_without_ports() -> None:
    egress = '[egress]\nnameservers = ["192.0.2.53", "[2001:db8::53]:5353", "127.0.0.53"]\n'
    policy = parse_policy(_policy('"none"', egress), look_up_names=False)
    assert policy.egress.nameservers == ("192.0.2.53", "[2001:db8::53]:5353", "127.0.0.53")


def test_check_policy_shows_each_clients_network(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(
        _policy(
            '{allow = ["pypi.org:443", "*.githubusercontent.com", "10.0.0.0/8:22"], max_bytes = 5000}',
            '[egress]\nnameservers = ["192.0.2.53"]\n',
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "roboz_helper", "check-policy", "--skip-paths", str(path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index(
        "clients[0] (uid 1000) -> profiles.dev: network through the helper's proxy, to these "
        "only (at most 64 connections at once, 5000 bytes per run; a run may ask for a subset):"
    )
    assert lines[start + 1 : start + 6] == [
        "  pypi.org:443 (port 443; its globally routable addresses)",
        "  *.githubusercontent.com (names below githubusercontent.com, not "
        "githubusercontent.com itself; any port)",
        "  10.0.0.0/8:22 (port 22; names private addresses)",
        "clients[1] (group nogroup) -> profiles.ci: network none",
        "egress: the proxy resolves names with 192.0.2.53",
    ]


def test_check_policy_exits_2_on_a_bad_entry(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(_policy('{allow = ["pypi.org:https"]}'))
    result = subprocess.run(
        [sys.executable, "-m", "roboz_helper", "check-policy", "--skip-paths", str(path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert result.stderr == (
        f"roboz-helper: error: {path}: profiles.dev.network.allow[0]: port 'https' is not a "
        "number within 1..65535\n"
    )


def test_the_readmes_allowlist_examples_are_valid_profiles() -> None:
    readme = (Path(__file__).resolve().parents[2] / "policies" / "README.md").read_text()
    blocks = [b.split("```", 1)[0] for b in readme.split("```toml\n")[1:]]
    examples = [b for b in blocks if "network = {allow" in b and "run_as_user" in b]
    assert len(examples) == 2  # a package index, a git server over SSH
    for block in examples:
        name = block.split("[profiles.", 1)[1].split("]", 1)[0]
        text = f'[[clients]]\nuid = 1000\nprofile = "{name}"\n' + block
        policy = parse_policy(text, look_up_names=False)
        assert isinstance(policy.profiles[name].network, NetworkAllow)
