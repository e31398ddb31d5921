"""sandbox-init's one privilege drop (drop_privileges in init.c), which the run process (cold
and prepared) and pid 1 both go through: what is left afterwards, read back from the kernel,
and uid or gid 0 refused whoever drops, whatever the configuration says."""

from __future__ import annotations

import pytest

from .c_driver import Driver

NOBODY = 65534
# NOROOT, NOROOT_LOCKED, NO_SETUID_FIXUP_LOCKED... : bits 0, 1, 3, 5, 6, 7 (init.c)
LOCKED_SECUREBITS = (1 << 0) | (1 << 1) | (1 << 3) | (1 << 5) | (1 << 6) | (1 << 7)


@pytest.mark.parametrize("who", ["run", "pid1"])
def test_every_dropper_ends_with_nothing(needs_root: None, c_driver: Driver, who: str) -> None:
    answer = c_driver("drop", NOBODY, NOBODY, 0, who)
    assert answer.ok, answer
    facts = dict(field.split("=", 1) for field in answer.fields)
    assert facts["uid"] == facts["gid"] == f"{NOBODY},{NOBODY},{NOBODY}", facts
    assert facts["groups"] == "0", facts
    assert facts["caps"] == "0,0,0,0,0", (
        facts
    )  # inheritable, permitted, effective, bounding, ambient
    assert facts["no_new_privs"] == "1", facts
    assert int(facts["securebits"]) == LOCKED_SECUREBITS, facts


@pytest.mark.parametrize("who", ["run", "pid1"])
@pytest.mark.parametrize(("uid", "gid"), [(0, NOBODY), (NOBODY, 0), (0, 0)])
def test_root_is_refused_by_every_dropper(
    needs_root: None, c_driver: Driver, who: str, uid: int, gid: int
) -> None:
    answer = c_driver("drop", uid, gid, 0, who)
    assert not answer.ok and answer.errno == 0, answer
    assert "refusing to run as uid 0" in answer.text, answer
