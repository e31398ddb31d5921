"""The specification's examples run unchanged as modules."""

import subprocess
import sys

from roboz.examples.simpsons_quotes import QUOTES


def run_module(name: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", name], input=stdin, capture_output=True, text=True, timeout=60
    )


def test_simple_example_prints_a_quote() -> None:
    done = run_module("roboz.examples.simple")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().strip('"') in QUOTES


def test_complex_example_chains_praise_and_escalation_until_hr_quits() -> None:
    done = run_module("roboz.examples.complex", stdin="3\nnot a number\n4\n6\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "3 a fine and bold choice!" in out
    assert "Please enter an integer :)" in out
    assert out.count("Careful now, that is pretty spicy!") == 2
    assert "Too much spiciness, need to quit!" in out
    assert "3 LLM call(s)" in out
    assert "interactive: it waits for you to type integers" in done.stderr
