"""sandbox-init, the C program that is every run's pid 1: installed with the helper, and a
clear refusal when it is not; what it is started with holds nothing of the helper."""

from __future__ import annotations

from pathlib import Path

import pytest
from roboz_helper.sandbox import init_wire, support

from .conftest import Sandbox


def test_the_program_is_installed_and_statically_linked() -> None:
    assert init_wire.missing() is None
    elf = Path(init_wire.BINARY).read_bytes()
    assert elf[:4] == b"\x7fELF" and elf[4] == 2  # 64-bit
    phoff = int.from_bytes(elf[0x20:0x28], "little")
    phentsize = int.from_bytes(elf[0x36:0x38], "little")
    phnum = int.from_bytes(elf[0x38:0x3A], "little")
    types = [
        int.from_bytes(elf[phoff + i * phentsize : phoff + i * phentsize + 4], "little")
        for i in range(phnum)
    ]
    # No PT_INTERP (3): no dynamic loader, nothing of a sandbox's /usr is loaded into pid 1.
    assert 3 not in types, "sandbox-init is dynamically linked"


def test_a_missing_program_is_a_clear_refusal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(init_wire, "BINARY", tmp_path / "sandbox-init")
    monkeypatch.setattr(support, "_cached", None)
    ok, why = support.sandbox_support()
    assert not ok
    assert "sandbox-init" in why and "missing" in why and "reinstall" in why
    monkeypatch.setattr(support, "_cached", None)


def test_pid1_is_the_program_with_an_empty_environment(sandbox: Sandbox) -> None:
    """Seen from inside: pid 1 runs sandbox-init (not a Python process), started with no
    arguments beyond its name; its environment is unreadable (not dumpable)."""
    r = sandbox.sh("cat /proc/1/comm; tr '\\0' ' ' < /proc/1/cmdline; echo; cat /proc/1/environ")
    assert r.outcome.status == "failed", r  # cat of /proc/1/environ: permission denied
    lines = r.out.splitlines()
    assert lines[:2] == ["sandbox-init", "sandbox-init "], r
    assert "Permission denied" in r.err, r
