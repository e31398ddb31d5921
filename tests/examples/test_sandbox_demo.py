"""README's main job: the sandbox demo runs end to end against a real helper daemon."""

import os
import subprocess
import sys


def test_sandbox_demo_runs_denies_patches_and_proves_isolation(needs_root: None) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "roboz.examples.sandbox_demo"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = done.stdout.split("\nSummary\n", 1)[1]
    assert "LLM calls made: 6" in summary
    assert "4 chained, without an LLM call" in summary
    assert "denied: run_file_command read secrets/api.key" in summary
    assert "secret copied into notes: no" in summary
    # The run works in the project, narrowed by the same policy: the secret is absent there.
    assert "denied secret read inside the sandbox (secrets/api.key): no" in summary
    assert "ok   denied_secret=unreadable" in summary
    assert "todo patched: yes" in summary
    assert "sandbox isolation held: yes" in summary
    assert "FAIL" not in summary
    # The helper stopped with the demo: its temporary socket directory is gone.
    socket_line = next(
        line for line in done.stdout.splitlines() if line.startswith("helper serving")
    )
    socket_path = socket_line.split()[2].rstrip(";")
    assert not os.path.exists(socket_path)
