"""The sandbox demo (README's main job), on embedded defaults: a mock LLM, a helper started
for the demo in a temporary directory, and a project directory with a permission policy.

The agent reads its notes, tries to copy a secret (denied, with a fallback), patches a note,
lists and runs a script in the helper's sandbox, whose working directory is the project:
the run is narrowed by the same permission policy, so the secret the file tools denied is
absent there too (the script tries it by its relative path). A chained tool checks the
script's report without another LLM call. A summary closes the run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

from roboz import Agent, tool
from roboz.examples.sandbox_demo.local_helper import NOBODY_UID, HelperStartError, local_helper
from roboz.llm import MockLLMEndpoint
from roboz.models import Message, Str
from roboz.runtime import EventPipe
from roboz.runtime.events import AgentFinished, Event, ToolStarted
from roboz.runtime.sinks import CliSink
from roboz.shed.guard import PermissionDecided
from roboz.shed.models import ActionVerdict, Operation, PermissionRule
from roboz.shed.safe_scripts.tool import ShellScriptOutcome, get_run_shell_script
from roboz.shed.sandbox import PermissionPolicy
from roboz.shed.skills import FilesystemContext, filesystem_skill
from roboz.tools import stop

ISOLATION_SCRIPT = """\
#!/bin/sh
# Report what a sandboxed run can see: identity, network, host files, processes.
secret="$1"; port="$2"
echo "uid=$(id -u)"
echo "capabilities=$(grep CapEff /proc/self/status | cut -f2)"
probe='import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 2)'
if /usr/bin/python3 -c "$probe" "$port" 2>/dev/null
then echo "host_network=reachable"; else echo "host_network=unreachable"; fi
if [ -e "$secret" ]; then echo "host_file=visible"; else echo "host_file=absent"; fi
if cat secrets/api.key >/dev/null 2>&1; then echo "denied_secret=readable"
else echo "denied_secret=unreadable"; fi
echo "processes=$(ls -d /proc/[0-9]* | wc -l)"
if touch /usr/probe 2>/dev/null; then echo "system=writable"; else echo "system=read-only"; fi
if touch notes/probe 2>/dev/null; then echo "workspace=writable"; rm -f notes/probe
else echo "workspace=read-only"; fi
"""

# What each line of the script's report must say for the sandbox to have held.
EXPECTED = {
    "host_network": "unreachable",
    "host_file": "absent",
    "denied_secret": "unreadable",
    "system": "read-only",
    "workspace": "writable",
    "capabilities": "0000000000000000",
}


class IsolationVerdict(Str):
    """Whether every isolation check held (``value`` explains each one)."""

    held: bool


def _is_isolation_report(output: Str) -> bool:
    return isinstance(output, ShellScriptOutcome) and output.script == "isolation.sh"


@tool(chained_to="run_shell_script", chain_condition=_is_isolation_report)
def check_isolation(input: Str, messages: list[Message]) -> IsolationVerdict:
    """Check the isolation report of the sandbox script (runs by itself after the script)."""
    report = dict(
        line.split("=", 1) for line in input.value.splitlines() if "=" in line and " " not in line
    )
    checks = {name: report.get(name) == want for name, want in EXPECTED.items()}
    checks["uid"] = report.get("uid", "0") != "0"
    checks["processes"] = int(report.get("processes", "999")) <= 5
    lines = [
        f"{'ok  ' if held else 'FAIL'} {name}={report.get(name)}" for name, held in checks.items()
    ]
    return IsolationVerdict(value="\n".join(lines), held=all(checks.values()))


def _project(base: Path) -> PermissionPolicy:
    (base / "notes").mkdir()
    (base / "notes" / "todo.md").write_text("# Todo\n- [ ] try the sandbox\n- [ ] read the docs\n")
    (base / "secrets").mkdir()
    (base / "secrets" / "api.key").write_text("sk-demo-not-a-real-key\n")
    if os.geteuid() == 0:  # the runs' user writes where the policy lets the agent write
        for path in (base / "notes", base / "notes" / "todo.md"):
            os.chown(path, NOBODY_UID, NOBODY_UID)
    return PermissionPolicy(
        base=base,
        default_verdict=ActionVerdict.deny,
        allow=(
            PermissionRule(
                pattern="notes/**",
                operations=frozenset({Operation.READ, Operation.CREATE, Operation.DELETE}),
            ),
        ),
    )


def _script(host_secret: Path, port: int) -> list[dict[str, object]]:
    return [
        {
            "action": "run_file_command",
            "rationale": "Read my notes first",
            "value": [["cat", "CMD"], ["notes/todo.md", "PTH"]],
        },
        {
            "action": "run_file_command",
            "rationale": "Copy the API key next to my notes, or else list the notes",
            "value": [
                ["cp", "CMD"],
                ["secrets/api.key", "PTH"],
                ["notes/key.txt", "PTH"],
                ["||", "CTL"],
                ["ls", "CMD"],
                ["notes", "PTH"],
            ],
        },
        {
            "action": "apply_patch",
            "rationale": "Tick off the first item",
            "path": "notes/todo.md",
            "old_string": "- [ ] try the sandbox",
            "new_string": "- [x] try the sandbox",
        },
        {"action": "run_shell_script", "rationale": "Which scripts may I run?"},
        {
            "action": "run_shell_script",
            "rationale": "Check the sandbox",
            "script": "isolation.sh",
            "args": [str(host_secret), str(port)],
        },
        {"action": "stop", "rationale": "All done", "value": "notes updated, sandbox checked"},
    ]


def report_value(verdicts: list[Message], name: str) -> str | None:
    """What the isolation report said for ``name`` (e.g. ``readable``), if it said."""
    if not verdicts:
        return None
    for line in json.loads(verdicts[-1].content)["value"].splitlines():
        _, _, pair = line.partition(" ")
        key, _, value = pair.strip().partition("=")
        if key == name:
            return value
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m roboz.examples.sandbox_demo",
        description="Run the sandbox demo: a mock-LLM agent works on files through guarded "
        "commands and runs a script in a SafeScripts helper started for the demo (as root the "
        "runs use the user nobody; otherwise the helper runs rootless in a user namespace). "
        "Exits 0 when the denial, the patch and every isolation check held.",
    )
    parser.parse_args(argv)
    events: list[Event] = []
    pipe = EventPipe([CliSink.default(), events.append])
    # Under /var/tmp rather than /tmp: a run's private /tmp would hide the host file anyway,
    # and the point is that nothing outside the binds is there at all.
    with (
        tempfile.TemporaryDirectory(prefix="roboz-demo-project-", dir="/var/tmp") as project_dir,
        socket.create_server(("127.0.0.1", 0)) as listener,
    ):
        project = Path(project_dir)
        policy = _project(project)
        # Outside the project on the host: not bound into the sandbox at all.
        host_secret = Path(project_dir + "-outside") / "api.key"
        host_secret.parent.mkdir()
        host_secret.write_text("sk-demo-outside\n")
        port = listener.getsockname()[1]  # a host service the sandbox must not reach
        try:
            with local_helper({"isolation.sh": ISOLATION_SCRIPT}, workdir=project) as helper:
                print(f"helper serving {helper.socket_path}; project {project}\n")
                endpoint = MockLLMEndpoint(_script(host_secret, port))
                agent = Agent(
                    name="sandbox-demo",
                    system_prompt="You keep the user's notes and check the sandbox.",
                    agent_endpoint=endpoint,
                    tools=[
                        # The agent's policy narrows every run: one policy, two enforcers.
                        get_run_shell_script(helper.socket_path, file_policy=policy),
                        check_isolation,
                        stop,
                    ],
                    auto_loaded_skills=[
                        filesystem_skill(FilesystemContext(permissions=policy, pipe=pipe))
                    ],
                    event_pipe=pipe,
                )
                result, messages = agent.invoke()
        except HelperStartError as error:
            print(f"sandbox demo: {error}", file=sys.stderr)
            return 1
        finally:
            shutil.rmtree(host_secret.parent, ignore_errors=True)
        verdicts = [m for m in messages if m.caller == "check_isolation"]
        todo = (project / "notes" / "todo.md").read_text()
        leaked = (project / "notes" / "key.txt").exists()
    finished = next(e for e in events if isinstance(e, AgentFinished))
    chained = sum(1 for e in events if isinstance(e, ToolStarted) and e.trigger == "chained")
    denied = [e for e in events if isinstance(e, PermissionDecided) and e.verdict == "deny"]
    held = bool(verdicts) and '"held":true' in verdicts[-1].content
    print("\nSummary")
    print(f"  result: {result.value}")
    print(f"  steps run: {finished.steps} ({chained} chained, without an LLM call)")
    print(f"  LLM calls made: {endpoint.calls}")
    for event in denied:
        reason = event.reason or "denied by policy"
        print(f"  denied: {event.tool} {event.operation} {event.path} ({reason})")
    print(f"  secret copied into notes: {'YES' if leaked else 'no'}")
    in_run = report_value(verdicts, "denied_secret")
    print(f"  denied secret read inside the sandbox (secrets/api.key): "
          f"{'YES' if in_run == 'readable' else 'no' if in_run else 'not tried'}")  # fmt: skip
    print(f"  todo patched: {'yes' if '- [x] try the sandbox' in todo else 'NO'}")
    print(f"  sandbox isolation held: {'yes' if held else 'NO'}")
    if verdicts:
        report = json.loads(verdicts[-1].content)["value"]
        print("\n".join(f"    {line}" for line in report.splitlines()))
    return 0 if held and not leaked and denied else 1


if __name__ == "__main__":
    raise SystemExit(main())
