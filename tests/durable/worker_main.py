"""A worker process for the durable tests: ``python -m tests.durable.worker_main EXECUTOR_ID``.

Launches ``tests.durable.app.runs`` under that executor id, prints ``ready``, and serves
until its stdin closes (or it is killed, which is the point of some tests).
"""

from __future__ import annotations

import sys

from tests.durable.app import runs


def main() -> None:
    runs.launch(executor_id=sys.argv[1])
    print("ready", flush=True)
    sys.stdin.read()
    runs.shutdown()


if __name__ == "__main__":
    main()
