"""sandbox-init's procedures called one at a time (c_driver.c, which includes the program's
sources whole): compiled once per session, run as a subprocess per call."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from roboz_helper.sandbox import init_wire

from tests.conftest import skip_or_fail

SOURCE = Path(__file__).with_name("c_driver.c")


@dataclass(frozen=True)
class Answer:
    ok: bool
    fields: list[str]  # after "ok": the details; after "error": errno, then the text
    text: str

    @property
    def errno(self) -> int:
        return int(self.fields[0])


class Driver:
    def __init__(self, binary: Path) -> None:
        self.binary = binary

    def __call__(self, *args: str | int, pass_fds: tuple[int, ...] = ()) -> Answer:
        done = subprocess.run(
            [str(self.binary), *map(str, args)], capture_output=True, text=True,
            pass_fds=pass_fds, timeout=30,
        )  # fmt: skip
        line = done.stdout.strip()
        assert done.returncode in (0, 1) and line, (done.returncode, line, done.stderr)
        word, _, rest = line.partition(" ")
        return Answer(word == "ok", rest.split(), rest)


def build(where: Path) -> Driver:
    """Compile the driver into ``where`` (the conftest's session fixture ``c_driver``)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        skip_or_fail("no C compiler to build the sandbox-init test driver")
        raise AssertionError("unreachable")
    binary = where / "c_driver"
    subprocess.run(
        [cc, "-O1", "-Wall", "-Wextra", "-Werror", "-I", str(init_wire.BINARY.parent), "-o",
         str(binary), str(SOURCE)], check=True,
    )  # fmt: skip
    return Driver(binary)
