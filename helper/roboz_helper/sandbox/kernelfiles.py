"""Writing the kernel's control files (``/proc/self/uid_map``, cgroupfs knobs).

Such a file takes its value in one ``write(2)`` and reports a refusal as that write's errno, so
it is written unbuffered through a descriptor the forked child does not inherit.
"""

from __future__ import annotations

import os


def write_control(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)
