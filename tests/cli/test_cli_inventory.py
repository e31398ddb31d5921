"""roboz inventory init|generate, run as subprocesses in temporary projects."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import assert_one_line_error, run_cli


def make_src_project(root: Path) -> Path:
    (root / "pyproject.toml").write_text('[project]\nname = "my-app"\nversion = "0"\n')
    package = root / "src" / "my_app"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    return package


def import_and_print(root: Path, module: str, expression: str, *, path: str = "src") -> str:
    result = subprocess.run(
        [sys.executable, "-c", f"import {module} as m; print({expression})"],
        cwd=root,
        env={"PYTHONPATH": str(root / path) if path else str(root), "PATH": ""},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_init_and_generate_in_a_src_layout(tmp_path: Path) -> None:
    package = make_src_project(tmp_path)

    init = run_cli("inventory", "init", cwd=tmp_path)
    generate = run_cli("inventory", "generate", cwd=tmp_path)

    assert init.returncode == 0, init.stderr
    assert generate.returncode == 0, generate.stderr
    catalogue = package / "model_catalogue"
    assert sorted(path.name for path in catalogue.iterdir()) == [
        "__init__.py",
        "models.json",
        "providers.py",
    ]
    printed = import_and_print(
        tmp_path,
        "my_app.model_catalogue.providers",
        "m.openrouter.z_ai__glm_5_3.model_name, m.openrouter.z_ai__glm_5_3.max_context_tokens",
    )
    assert printed == "z-ai/glm-5.3 202752"


def test_edited_json_is_regenerated(tmp_path: Path) -> None:
    package = make_src_project(tmp_path)
    run_cli("inventory", "init", cwd=tmp_path)
    source = package / "model_catalogue" / "models.json"
    data = json.loads(source.read_text())
    data["providers"]["my_service"] = {
        "base_url": "https://models.example.com/v1",
        "api_key_env": "MY_SERVICE_API_KEY",
        "models": {
            "my_chat_model": {
                "model_id": "my-chat-model",
                "endpoint_type": "llm",
                "max_context_tokens": 128000,
            }
        },
    }
    source.write_text(json.dumps(data))

    assert run_cli("inventory", "generate", cwd=tmp_path).returncode == 0
    assert run_cli("inventory", "generate", cwd=tmp_path).returncode == 0  # replaces its own

    printed = import_and_print(
        tmp_path, "my_app.model_catalogue.providers", "m.my_service.my_chat_model.model_name"
    )
    assert printed == "my-chat-model"


def test_flat_layout_and_no_package_fallback(tmp_path: Path) -> None:
    flat = tmp_path / "flat"
    (flat / "my_app").mkdir(parents=True)
    (flat / "pyproject.toml").write_text('[project]\nname = "my-app"\n')
    bare = tmp_path / "bare"
    bare.mkdir()

    assert run_cli("inventory", "init", cwd=flat).returncode == 0
    assert run_cli("inventory", "init", cwd=bare).returncode == 0

    assert (flat / "my_app" / "model_catalogue" / "models.json").is_file()
    assert (bare / "model_catalogue" / "models.json").is_file()


def test_init_says_which_package_it_chose(tmp_path: Path) -> None:
    make_src_project(tmp_path)
    result = run_cli("inventory", "init", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "src/my_app/model_catalogue/models.json (package 'my_app', from pyproject.toml)" in (
        result.stdout
    )


def test_the_only_package_in_src_is_chosen_and_named(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "distribution-name"\n')
    (tmp_path / "src" / "importname").mkdir(parents=True)
    (tmp_path / "src" / "importname" / "__init__.py").write_text("")

    result = run_cli("inventory", "init", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert "the only package in src/, 'importname'" in result.stdout
    assert (tmp_path / "src" / "importname" / "model_catalogue" / "models.json").is_file()


def test_several_packages_in_src_ask_for_path(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "distribution-name"\n')
    for name in ("alpha", "beta"):
        (tmp_path / "src" / name).mkdir(parents=True)
        (tmp_path / "src" / name / "__init__.py").write_text("")

    for command in ("init", "generate"):
        result = run_cli("inventory", command, cwd=tmp_path)
        assert_one_line_error(
            result, 2, "src/ holds several packages (alpha, beta) and none is named"
        )
        assert "--path src/<package>/model_catalogue/models.json" in result.stderr
    # Nothing was created anywhere, in particular not a stray model_catalogue at the root.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml", "src"]
    explicit = run_cli("inventory", "init", "--path", "src/beta/models.json", cwd=tmp_path)
    assert explicit.returncode == 0, explicit.stderr


def test_init_never_overwrites_the_json(tmp_path: Path) -> None:
    make_src_project(tmp_path)
    run_cli("inventory", "init", cwd=tmp_path)
    source = tmp_path / "src" / "my_app" / "model_catalogue" / "models.json"
    source.write_text('{"providers": {}}')

    result = run_cli("inventory", "init", cwd=tmp_path)

    assert_one_line_error(result, 1, "already exists and is never overwritten")
    assert source.read_text() == '{"providers": {}}'


def test_explicit_paths(tmp_path: Path) -> None:
    package = make_src_project(tmp_path)
    (package / "endpoints").mkdir()
    (package / "endpoints" / "__init__.py").write_text("")
    source = "src/my_app/endpoints/models.json"

    assert run_cli("inventory", "init", "--path", source, cwd=tmp_path).returncode == 0
    assert run_cli("inventory", "generate", "--path", source, cwd=tmp_path).returncode == 0
    other = run_cli(
        "inventory", "generate", "--path", source, "--output", "src/my_app/routes.py", cwd=tmp_path
    )

    assert other.returncode == 0, other.stderr
    assert (package / "endpoints" / "providers.py").is_file()
    assert import_and_print(tmp_path, "my_app.routes", "m.groq.whisper_large_v3.model_name") == (
        "whisper-large-v3"
    )


@pytest.mark.parametrize(
    ("args", "code", "text"),
    [
        (["init", "--path", "missing/models.json"], 1, "create the Python package first"),
        (["init", "--path", "catalogue.txt"], 2, "name the catalogue's .json file"),
        (["generate", "--path", "absent.json"], 2, "no catalogue here; check --path"),
        (["generate", "--path", "models.json", "--output", "out.txt"], 2, "name a .py file"),
    ],
)
def test_path_errors(tmp_path: Path, args: list[str], code: int, text: str) -> None:
    (tmp_path / "models.json").write_text('{"providers": {}}')
    assert_one_line_error(run_cli("inventory", *args, cwd=tmp_path), code, text)


def test_invalid_catalogue_names_the_json_path(tmp_path: Path) -> None:
    (tmp_path / "models.json").write_text(
        json.dumps(
            {
                "providers": {
                    "svc": {
                        "base_url": "https://x.example/v1",
                        "models": {"m": {"model_id": "m", "endpoint_type": "llm"}},
                    }
                }
            }
        )
    )

    result = run_cli("inventory", "generate", "--path", "models.json", cwd=tmp_path)

    # 2, as for every invalid input file (an invalid policy exits 2 too).
    assert_one_line_error(
        result, 2, "$.providers.svc.models.m.max_context_tokens: required for llm models"
    )
    assert not (tmp_path / "providers.py").exists()


def test_generate_leaves_a_handwritten_module_alone(tmp_path: Path) -> None:
    run_cli("inventory", "init", "--path", "models.json", cwd=tmp_path)
    (tmp_path / "providers.py").write_text("MINE = 1\n")

    result = run_cli("inventory", "generate", "--path", "models.json", cwd=tmp_path)

    assert_one_line_error(result, 1, "no generated-file marker")
    assert (tmp_path / "providers.py").read_text() == "MINE = 1\n"
