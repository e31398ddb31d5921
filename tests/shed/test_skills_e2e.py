"""The filesystem and pdf skills: their tools and chains, and a whole Agent run on them."""

from __future__ import annotations

import json

from roboz import Agent
from roboz.llm import MockLLMEndpoint
from roboz.models import Message, Role, Stop
from roboz.runtime import EventPipe
from roboz.shed.guard import PermissionDecided
from roboz.shed.models import ActionVerdict, Operation, PermissionRule
from roboz.shed.sandbox import PermissionPolicy
from roboz.shed.skills import FilesystemContext, PdfContext, filesystem_skill, pdf_skill
from roboz.shed.tools import get_apply_patch, get_run_file_command
from roboz.shed.tools.pdf import get_pdf_tool
from roboz.tools import stop

from .fileutil import SECRET, make_workspace, snapshot
from .test_pdf import pdf_bytes


def tool_results(messages: list[Message], caller: str) -> list[str]:
    return [
        json.loads(m.content)["value"]
        for m in messages
        if m.role is Role.TOOL and m.caller == caller
    ]


def test_skills_hold_both_chains(tmp_path):
    policy = PermissionPolicy(base=tmp_path)
    skill = filesystem_skill(FilesystemContext(permissions=policy, pipe=EventPipe()))
    assert skill.name == "filesystem"
    names = {t.name: t for t in skill.tools}
    assert not names["run_file_command"].is_chained and not names["apply_patch"].is_chained
    assert names["execute_file_command"].chained_to == ("run_file_command",)
    assert names["write_patch"].chained_to == ("apply_patch",)
    assert "rg [FLG...] PATTERN_ARG" in skill.instructions
    assert "Patch or rewrite?" in skill.instructions
    pdf = pdf_skill(PdfContext(permissions=policy, pipe=EventPipe()))
    assert pdf.name == "pdf" and [t.name for t in pdf.tools] == ["process_pdf", "read_pdf_pages"]
    ctx = FilesystemContext(permissions=policy)
    assert [t.name for t in get_run_file_command(ctx)] == [
        "run_file_command",
        "execute_file_command",
    ]
    assert [t.name for t in get_apply_patch(ctx)] == ["apply_patch", "write_patch"]
    assert get_pdf_tool(PdfContext(permissions=policy))[0].name == "process_pdf"


def test_seed_example(tmp_path, monkeypatch):
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    pipe = EventPipe()
    permissions = PermissionPolicy(
        base=Path.cwd(),
        default_verdict=ActionVerdict.deny,
        allow=(
            PermissionRule(
                pattern="notes/**",
                operations={Operation.READ, Operation.CREATE, Operation.DELETE},
            ),
        ),
    )
    file_skill = filesystem_skill(FilesystemContext(permissions=permissions, pipe=pipe))
    assert file_skill.name == "filesystem"


def test_agent_reads_is_denied_patches_and_falls_back(tmp_path):
    ws = make_workspace(tmp_path)
    pipe = EventPipe()
    decisions: list[PermissionDecided] = []
    pipe.subscribe(lambda e: decisions.append(e) if isinstance(e, PermissionDecided) else None)
    skill = filesystem_skill(FilesystemContext(permissions=ws.policy, pipe=pipe))
    private_before = snapshot(ws.base / "private")
    outside_before = ws.outside_snapshot()
    endpoint = MockLLMEndpoint(
        [
            {
                "action": "run_file_command",
                "rationale": "read the note",
                "value": [["cat", "CMD"], ["notes/a.txt", "PTH"]],
            },
            {
                "action": "run_file_command",
                "rationale": "try to overwrite the key",
                "value": [
                    ["cat", "CMD"],
                    ["notes/a.txt", "PTH"],
                    ["|", "CTL"],
                    ["tee", "CMD"],
                    ["private/key.txt", "PTH"],
                ],
            },
            {
                "action": "apply_patch",
                "rationale": "fix the note",
                "path": "notes/a.txt",
                "old_string": "beta line",
                "new_string": "gamma line",
            },
            {
                "action": "run_file_command",
                "rationale": "read with a fallback",
                "value": [
                    ["cat", "CMD"],
                    ["private/key.txt", "PTH"],
                    ["||", "CTL"],
                    ["cat", "CMD"],
                    ["notes/a.txt", "PTH"],
                ],
            },
            {"action": "stop", "rationale": "done", "value": "finished"},
        ]
    )
    agent = Agent(
        name="files",
        system_prompt="You edit notes.",
        agent_endpoint=endpoint,
        tools=[stop],
        auto_loaded_skills=[skill],
        event_pipe=pipe,
    )
    output, messages = agent.invoke()
    assert isinstance(output, Stop) and output.value == "finished"
    results = tool_results(messages, "execute_file_command")
    assert "alpha line\nbeta line" in results[0]
    assert "DENIED: create private/key.txt: denied by policy" in results[1]
    assert "patched notes/a.txt: 1 replacement(s)" in tool_results(messages, "write_patch")[0]
    assert "DENIED: read private/key.txt" in results[2]
    assert "alpha line\ngamma line" in results[2] and "exit status 0" in results[2]
    assert (ws.base / "notes/a.txt").read_bytes() == b"alpha line\ngamma line\n"
    assert snapshot(ws.base / "private") == private_before
    assert ws.outside_snapshot() == outside_before
    assert all(SECRET.decode() not in m.content for m in messages)
    assert any(d.verdict == "deny" and d.path == "private/key.txt" for d in decisions)
    # the skill's instructions reached the LLM; the intermediate plans did not
    system = endpoint.requests[0][0]
    assert "Commands and every option allowed" in str(system)
    assert all("checking permissions and running" not in str(r) for r in endpoint.requests)


def test_agent_loads_pdf_skill_on_demand(tmp_path):
    ws = make_workspace(tmp_path)
    (ws.base / "notes/r.pdf").write_bytes(pdf_bytes(["first page", "second page"]))
    skill = pdf_skill(PdfContext(permissions=ws.policy))
    endpoint = MockLLMEndpoint(
        [
            {"action": "pdf", "rationale": "need pdf"},
            {
                "action": "process_pdf",
                "rationale": "Read the report",
                "path": "notes/r.pdf",
                "start_page": 2,
                "end_page": 2,
            },
            {"action": "process_pdf", "rationale": "outside", "path": "private/key.txt"},
            {"action": "stop", "value": "ok"},
        ]
    )
    agent = Agent(name="pdf", agent_endpoint=endpoint, tools=[stop], skills=[skill])
    _, messages = agent.invoke()
    results = tool_results(messages, "read_pdf_pages")
    assert "--- page 2 of 2 ---\nsecond page" in results[0] and "first page" not in results[0]
    assert "DENIED" in results[1] and SECRET.decode() not in results[1]


def test_filesystem_skill_on_demand_and_ask_through_the_agents_user_io(tmp_path):
    from .fileutil import ScriptedIO

    ws = make_workspace(
        tmp_path, ask=(PermissionRule(pattern="notes/sub/**", operations={Operation.DELETE}),)
    )
    skill = filesystem_skill(FilesystemContext(permissions=ws.policy))
    endpoint = MockLLMEndpoint(
        [
            {"action": "filesystem", "rationale": "need files"},
            {
                "action": "run_file_command",
                "rationale": "clean up",
                "value": [["rm", "CMD"], ["notes/sub/b.md", "PTH"]],
            },
            {"action": "stop", "value": "done"},
        ]
    )
    user = ScriptedIO("no")
    agent = Agent(name="fs", agent_endpoint=endpoint, tools=[stop], skills=[skill], user_io=user)
    _, messages = agent.invoke()
    result = tool_results(messages, "execute_file_command")[0]
    assert "did not approve" in result
    assert (ws.base / "notes/sub/b.md").exists()
    assert any("delete notes/sub/b.md" in prompt for prompt in user.prompts)
