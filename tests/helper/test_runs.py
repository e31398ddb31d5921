"""A profile's limits reach the greeting and the sandbox under one list of names."""

from __future__ import annotations

import dataclasses

import msgspec
from roboz_helper import runs
from roboz_helper.policy import parse_policy
from roboz_helper.protocol import Limits
from roboz_helper.sandbox import SandboxSpec

POLICY = """
[[clients]]
uid = 1
profile = "p"
[profiles.p]
run_as_user = "nobody"
scripts_dir = "/s"
workdir = "/w"
network = "loopback"
timeout_s = 1.5
max_output_bytes = 2
pids_max = 3
memory_max_bytes = 4
tmp_size_bytes = 5
max_file_bytes = 6
nofile_max = 7
cpu_time_s = 8
"""


def test_every_wire_limit_is_a_profile_limit_with_the_same_name() -> None:
    wire = {f.name for f in msgspec.structs.fields(Limits)}
    assert wire == {*runs.LIMIT_FIELDS, "max_runs"}
    assert set(runs.LIMIT_FIELDS) <= {f.name for f in dataclasses.fields(SandboxSpec)}


def test_the_greeting_and_the_spec_carry_the_profiles_values() -> None:
    profile = parse_policy(POLICY).profiles["p"]
    limits = runs.limits_of(profile, max_runs=9)
    spec = runs.build_spec(profile, ["/bin/true"], None, "r1")
    expected = {name: getattr(profile, name) for name in runs.LIMIT_FIELDS}
    assert len(set(expected.values())) == len(expected)  # distinct: a swap would show
    for name, value in expected.items():
        assert getattr(limits, name) == value == getattr(spec, name), name
    assert limits.max_runs == 9
