"""A run's file view (view.py, apply_view in init_root.c): what a file policy denies is absent
inside the sandbox, read-only paths are read-only, and only write-allowed paths are writable.

Every attack of issue 25 runs inside a real sandbox (cold and warm, like the rest of the
suite) and the test checks that the secret's bytes never came out and that nothing on the
host changed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from roboz_helper.file_policy import FilePolicy, FileRule
from roboz_helper.sandbox import SandboxError

from tests.sandbox.conftest import RUN_GID, RUN_UID, Sandbox

SECRET = "s3cr3t-api-key"


def _project(ws: Path) -> None:
    (ws / "secrets").mkdir()
    (ws / "secrets" / "api.key").write_text(SECRET)
    (ws / "src").mkdir()
    (ws / "src" / "main.py").write_text("print('hi')\n")
    (ws / "src" / ".env").write_text(SECRET + "-env")
    (ws / "docs").mkdir()
    (ws / "docs" / "guide.md").write_text("guide\n")
    (ws / "README").write_text("readme\n")
    for path in [ws, *ws.rglob("*")]:
        os.chown(path, RUN_UID, RUN_GID)


def _policy(ws: Path, **changes: object) -> FilePolicy:
    fields: dict[str, object] = {
        "base": str(ws),
        "default": "deny",
        "allow": (FileRule(pattern="**"),),
        "deny": (FileRule(pattern="secrets/**"), FileRule(pattern="**/.env")),
        "ask": (),
    }
    fields.update(changes)
    return FilePolicy(**fields)  # type: ignore[arg-type]


def _snapshot(ws: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(ws)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(ws.rglob("*"))
    }


@pytest.fixture
def project(sandbox: Sandbox) -> Sandbox:
    _project(sandbox.workspace)
    return sandbox


def test_without_a_file_policy_the_secret_is_readable(project: Sandbox) -> None:
    # The starting point, so the tests below prove something.
    result = project.exec("/usr/bin/cat", "secrets/api.key")
    assert result.outcome.status == "success", result
    assert SECRET in result.out


ATTACKS = {
    "relative": "cat secrets/api.key",
    "absolute": "cat {ws}/secrets/api.key",
    "wc": "/usr/bin/wc -c secrets/api.key",
    "dotdot": "cat src/../secrets/api.key",
    "symlink_in_tmp": "ln -s {ws}/secrets/api.key /tmp/k && cat /tmp/k",
    "symlink_in_ws": "ln -s ../secrets/api.key src/k && cat src/k",
    "hardlink": "ln {ws}/secrets/api.key /tmp/h && cat /tmp/h",
    "grep_r": "grep -r s3cr3t .",
    "find_exec": "find . -type f -exec cat {{}} +",
    "proc_root": "cat /proc/self/root{ws}/secrets/api.key",
    "proc_cwd": "cat /proc/self/cwd/secrets/api.key",
    "ls": "ls -la secrets",
    "env_by_name": "cat src/.env",
    "tar": "tar cf - . | cat",
    "mv_mask_away": "mv secrets /tmp/x; cat /tmp/x/api.key",
    "rename_parent": "mkdir -p a && mv secrets a/; cat a/secrets/api.key",
    "umount": "umount secrets; cat secrets/api.key",
    "mount_over": "mount --bind src secrets; cat secrets/api.key",
    "python_opendir": (
        "python3 -c \"import os; fd=os.open('.', os.O_RDONLY); "
        "print(open(os.open('secrets/api.key', os.O_RDONLY, dir_fd=fd)).read())\""
    ),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_denied_secret_is_absent_whatever_the_path(project: Sandbox, name: str) -> None:
    ws = project.workspace
    before = _snapshot(ws)
    command = ATTACKS[name].format(ws=ws)
    result = project.exec("/bin/sh", "-c", command, file_policies=(_policy(ws),))
    assert SECRET not in result.out and SECRET not in result.err, result
    assert "set-up failed" not in result.outcome.diagnostic, result  # the view was built
    after = _snapshot(ws)
    # The run may have made its own files (a/, src/k); the secret and everything that
    # existed are unchanged.
    assert {k: v for k, v in after.items() if k in before} == before, name


def test_reads_writes_and_listing_of_allowed_paths_still_work(project: Sandbox) -> None:
    ws = project.workspace
    result = project.exec(
        "/bin/sh",
        "-c",
        "cat src/main.py && ls && echo made > new.txt && cat new.txt && ls secrets; echo rc=$?",
        file_policies=(_policy(ws),),
    )
    assert result.outcome.status == "success", result
    assert "print('hi')" in result.out and "made" in result.out
    assert "rc=2" in result.out  # ls of the masked directory: permission denied
    assert (ws / "new.txt").read_text() == "made\n"


def test_read_only_paths_are_read_only_and_writable_ones_writable(project: Sandbox) -> None:
    ws = project.workspace
    policy = _policy(
        ws,
        deny=(FileRule(pattern="secrets/**"),
              FileRule(pattern="docs/**", operations=("create", "delete"))),
    )  # fmt: skip
    result = project.exec(
        "/bin/sh",
        "-c",
        "cat docs/guide.md; echo x >> docs/guide.md; echo w1=$?; rm docs/guide.md; echo w2=$?;"
        " touch docs/new; echo w3=$?; mv docs gone; echo w4=$?; echo ok > src/out; echo w5=$?",
        file_policies=(policy,),
    )
    assert result.outcome.status == "success", result
    assert "guide" in result.out
    for write in ("w1", "w2", "w3", "w4"):
        assert f"{write}=0" not in result.out and f"{write}=" in result.out, result
    assert "w5=0" in result.out
    assert (ws / "docs" / "guide.md").read_text() == "guide\n"
    assert not (ws / "docs" / "new").exists() and not (ws / "gone").exists()


def test_default_deny_of_writes_makes_the_workdir_read_only_but_allowed_subtrees(
    project: Sandbox,
) -> None:
    ws = project.workspace
    policy = FilePolicy(
        base=str(ws),
        default="deny",
        allow=(FileRule(pattern="**", operations=("read",)), FileRule(pattern="src/**")),
    )
    result = project.exec(
        "/bin/sh",
        "-c",
        "touch top; echo t=$?; touch src/inner; echo i=$?; rm README; echo r=$?",
        file_policies=(policy,),
    )
    assert "t=0" not in result.out and "i=0" in result.out and "r=0" not in result.out, result
    assert not (ws / "top").exists() and (ws / "src" / "inner").exists()
    assert (ws / "README").exists()


def test_a_policy_that_denies_the_whole_workdir_refuses_the_run(project: Sandbox) -> None:
    ws = project.workspace
    policy = FilePolicy(base=str(ws), default="deny", allow=(FileRule(pattern="/elsewhere/**"),))
    with pytest.raises(SandboxError, match="nothing in the workdir .* may be read"):
        project.exec("/usr/bin/cat", "secrets/api.key", file_policies=(policy,))


def test_an_unlistable_workdir_shows_only_its_allowed_parts(project: Sandbox) -> None:
    # default deny, only src/ allowed: the workdir cannot be listed, secrets/ and the rest
    # are absent (not even their names), src/ works, writes outside src/ fail.
    ws = project.workspace
    policy = FilePolicy(base=str(ws), default="deny", allow=(FileRule(pattern="src/**"),))
    result = project.exec(
        "/bin/sh",
        "-c",
        "ls; echo l=$?; cat src/main.py; ls src; cat secrets/api.key; echo s=$?; "
        "ls -d secrets README; echo n=$?; echo x > src/new; echo w=$?; touch top; echo t=$?",
        file_policies=(policy,),
    )
    assert result.outcome.status == "success", result
    out = result.out
    assert "l=0" not in out and "print('hi')" in out and "main.py" in out, result
    assert SECRET not in out and "s=0" not in out and "n=0" not in out, result
    assert "No such file" in result.err  # absent, not just unreadable
    assert "w=0" in out and "t=0" not in out, result
    assert (ws / "src" / "new").read_text() == "x\n" and not (ws / "top").exists()


def test_two_policies_compose_to_the_narrower(project: Sandbox) -> None:
    ws = project.workspace
    operator = _policy(ws, deny=(FileRule(pattern="docs/**"),))
    client = FilePolicy(base=str(ws), default="allow")  # tries to allow everything
    result = project.exec(
        "/bin/sh", "-c", "cat docs/guide.md; cat secrets/api.key", file_policies=(operator, client)
    )
    assert "guide" not in result.out, result
    assert SECRET in result.out  # the operator did not deny it, and the client allows all


def _race_after_planning(monkeypatch: pytest.MonkeyPatch, race: object) -> None:
    """Run ``race`` right after the helper resolved the view and before pid 1 applies it:
    the window a concurrent rename would have to hit."""
    from roboz_helper.sandbox import SandboxSpec, mounts

    real = mounts.plan_mounts

    def plan_then_race(spec: SandboxSpec, script: bytes | None) -> mounts.MountPlan:
        planned = real(spec, script)
        if spec.argv != ["/bin/true"]:  # not the warm-up run of the warm variant
            race()  # type: ignore[operator]
        return planned

    monkeypatch.setattr(mounts, "plan_mounts", plan_then_race)


def test_a_rename_racing_the_start_fails_the_run_instead_of_exposing_it(
    project: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = project.workspace

    def swap() -> None:  # the secret moves to an allowed name, a decoy takes its place
        (ws / "secrets").rename(ws / "public")
        (ws / "secrets").mkdir()

    _race_after_planning(monkeypatch, swap)
    result = project.exec("/usr/bin/cat", "public/api.key", file_policies=(_policy(ws),))
    assert result.outcome.status == "failed", result
    assert "changed between its check and the run's start" in result.outcome.diagnostic
    assert SECRET not in result.out and result.outcome.exit_code != 0


def test_a_denied_path_gone_at_the_start_fails_the_run(
    project: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = project.workspace
    _race_after_planning(monkeypatch, lambda: (ws / "secrets").rename(ws / "public"))
    result = project.exec("/usr/bin/cat", "public/api.key", file_policies=(_policy(ws),))
    assert result.outcome.status == "failed", result
    assert SECRET not in result.out


def test_a_symlink_swapped_in_for_a_denied_path_fails_the_run(
    project: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = project.workspace

    def swap() -> None:
        (ws / "secrets").rename(ws / "public")
        (ws / "secrets").symlink_to("src")

    _race_after_planning(monkeypatch, swap)
    result = project.exec("/usr/bin/cat", "public/api.key", file_policies=(_policy(ws),))
    assert result.outcome.status == "failed", result
    assert "symlink" in result.outcome.diagnostic and SECRET not in result.out


def test_what_others_create_in_a_masked_directory_during_the_run_stays_hidden(
    project: Sandbox,
) -> None:
    # The mask is over the directory: a file the host (someone else) adds there while the run
    # is going is behind it too. The script waits until the file exists on the host.
    ws = project.workspace
    marker = ws / "src" / "go"
    script = f"""
        import os, time, pathlib
        pathlib.Path("{marker}").write_text("x")
        for _ in range(2000):
            if os.path.exists("{ws}/ready"):
                break
            time.sleep(0.005)
        for path in ("secrets/late.key", "{ws}/secrets/late.key"):
            try:
                print(open(path).read())
            except OSError as exc:
                print("denied", exc.errno)
    """
    import threading

    def plant() -> None:
        for _ in range(4000):
            if marker.exists():
                break
            threading.Event().wait(0.005)
        (ws / "secrets" / "late.key").write_text(SECRET + "-late")
        (ws / "ready").write_text("")

    planter = threading.Thread(target=plant)
    planter.start()
    try:
        result = project.py(script, file_policies=(_policy(ws),))
    finally:
        planter.join()
    assert result.outcome.status == "success", result
    assert SECRET not in result.out and result.out.count("denied") == 2, result


def test_a_file_system_refusal_is_reported_as_one_not_as_seccomp(sandbox: Sandbox) -> None:
    # The workdir belongs to root: the run's user cannot write there. That is the file
    # system's answer (EACCES), and the diagnostic says so, without the seccomp note.
    os.chown(sandbox.workspace, 0, 0)
    os.chmod(sandbox.workspace, 0o755)
    result = sandbox.exec("/bin/sh", "-c", "echo x > made.txt")
    assert result.outcome.status == "failed", result
    assert "permission denied by the file system" in result.outcome.diagnostic
    assert "run_as_user" in result.outcome.diagnostic
    assert "seccomp" not in result.outcome.diagnostic
    assert not (sandbox.workspace / "made.txt").exists()


def test_the_seccomp_note_stays_unless_only_the_file_system_refused(sandbox: Sandbox) -> None:
    eperm = sandbox.exec("/usr/bin/unshare", "-U", "/bin/true")
    assert eperm.outcome.status == "failed", eperm
    assert "seccomp filter" in eperm.outcome.diagnostic
    assert "file system" not in eperm.outcome.diagnostic
    # Both kinds reported: both notes.
    both = sandbox.exec("/bin/sh", "-c", "echo x > /usr/x; unshare -U true")
    assert "seccomp filter" in both.outcome.diagnostic
    assert "permission denied by the file system" in both.outcome.diagnostic
