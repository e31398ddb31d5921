"""Encrypted .env storage: round trips, tampering, name binding and loading precedence."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from roboz.endpoints import (
    DEFAULT_ENCRYPTED_ENV_PATH,
    ENCRYPTED_NAMESPACE,
    ENCRYPTED_SUFFIX,
    SecretsError,
    decrypt_env_values,
    encrypt_env,
    encrypt_env_values,
    load_secrets,
    parse_env,
    serialize_env,
)
from roboz.endpoints import env as env_module

PASSWORD = "correct horse battery staple"


def test_public_constants() -> None:
    assert ENCRYPTED_SUFFIX == "_ENCRYPTED"
    assert ENCRYPTED_NAMESPACE == "roboz:"
    assert Path(".env.encrypt") == DEFAULT_ENCRYPTED_ENV_PATH
    assert env_module.ENCRYPTED_SUFFIX is ENCRYPTED_SUFFIX
    assert env_module.DEFAULT_ENCRYPTED_ENV_PATH is DEFAULT_ENCRYPTED_ENV_PATH


def test_round_trip_encrypts_only_chosen_names_and_keeps_order() -> None:
    values = {
        "LOG_LEVEL": "debug",
        "OPENROUTER_API_KEY": "sk-or-123",
        "PROTON_BRIDGE_PASSWORD": 'p@ss "word"\nline2',
        "REGION": "eu",
    }

    stored = encrypt_env_values(
        values, secret_names=["OPENROUTER_API_KEY", "PROTON_BRIDGE_PASSWORD"], password=PASSWORD
    )

    assert list(stored) == [
        "LOG_LEVEL",
        "OPENROUTER_API_KEY_ENCRYPTED",
        "PROTON_BRIDGE_PASSWORD_ENCRYPTED",
        "REGION",
    ]
    assert stored["LOG_LEVEL"] == "debug" and stored["REGION"] == "eu"
    assert stored["OPENROUTER_API_KEY_ENCRYPTED"].startswith("roboz:v1:")
    text = serialize_env(stored)
    assert "sk-or-123" not in text and "p@ss" not in text
    assert decrypt_env_values(parse_env(text), password=PASSWORD) == values


def test_same_value_encrypts_differently_each_time() -> None:
    first = encrypt_env_values({"K": "v"}, secret_names=["K"], password=PASSWORD)
    second = encrypt_env_values({"K": "v"}, secret_names=["K"], password=PASSWORD)
    assert first["K_ENCRYPTED"] != second["K_ENCRYPTED"]


def test_wrong_password_names_the_entry() -> None:
    stored = encrypt_env_values({"API_KEY": "sk-1"}, secret_names=["API_KEY"], password=PASSWORD)

    with pytest.raises(SecretsError, match="API_KEY_ENCRYPTED: cannot decrypt") as caught:
        decrypt_env_values(stored, password="not the password")
    assert "sk-1" not in str(caught.value)


def test_tampered_ciphertext_is_rejected() -> None:
    stored = encrypt_env_values({"API_KEY": "sk-1"}, secret_names=["API_KEY"], password=PASSWORD)
    token = stored["API_KEY_ENCRYPTED"]
    flipped = "A" if token[-3] != "A" else "B"
    stored["API_KEY_ENCRYPTED"] = token[:-3] + flipped + token[-2:]

    with pytest.raises(SecretsError, match="API_KEY_ENCRYPTED"):
        decrypt_env_values(stored, password=PASSWORD)


def test_values_swapped_between_names_do_not_decrypt() -> None:
    stored = encrypt_env_values(
        {"CHEAP_KEY": "sk-cheap", "PROD_KEY": "sk-prod"},
        secret_names=["CHEAP_KEY", "PROD_KEY"],
        password=PASSWORD,
    )
    swapped = {
        "CHEAP_KEY_ENCRYPTED": stored["PROD_KEY_ENCRYPTED"],
        "PROD_KEY_ENCRYPTED": stored["CHEAP_KEY_ENCRYPTED"],
    }

    with pytest.raises(SecretsError, match="CHEAP_KEY_ENCRYPTED: cannot decrypt"):
        decrypt_env_values(swapped, password=PASSWORD)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("roboz:v1:only:two", "malformed"),
        ("roboz:v0:aaaa:bbbb:cccc", "not roboz:v1: ciphertext"),
        ("sk-plaintext", "not roboz:v1: ciphertext"),
    ],
)
def test_malformed_stored_values_are_rejected(value: str, message: str) -> None:
    with pytest.raises(SecretsError, match=message):
        decrypt_env_values({"KEY_ENCRYPTED": value}, password=PASSWORD)


def test_plain_values_that_merely_start_with_the_namespace_stay_plain() -> None:
    assert decrypt_env_values({"URL": "roboz:docs"}, password=None) == {"URL": "roboz:docs"}


def test_ciphertext_under_an_unsuffixed_name_is_rejected() -> None:
    # What a 0.10-style OPENROUTER_API_KEY_SECRET entry looks like to this version.
    stored = encrypt_env_values({"K": "v"}, secret_names=["K"], password=PASSWORD)
    with pytest.raises(SecretsError, match="OPENROUTER_API_KEY_SECRET: holds roboz: ciphertext"):
        decrypt_env_values({"OPENROUTER_API_KEY_SECRET": stored["K_ENCRYPTED"]}, password=PASSWORD)


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["MISSING"], "MISSING: no such entry"),
        (["KEY_ENCRYPTED"], "suffix is reserved"),
        ([], "at least one secret"),
    ],
)
def test_bad_secret_choices_are_refused(names: list[str], message: str) -> None:
    with pytest.raises(SecretsError, match=message):
        encrypt_env_values({"KEY": "v", "KEY_ENCRYPTED": "x"}, secret_names=names, password="pw")


def test_empty_password_is_refused() -> None:
    with pytest.raises(SecretsError, match="non-empty"):
        encrypt_env_values({"KEY": "v"}, secret_names=["KEY"], password="")


@pytest.mark.parametrize(
    "value",
    ["", "plain", "with space", 'quote " and \\ slash', "hash # inside", "multi\nline\ttab", "ünï"],
)
def test_serialize_then_parse_is_identity(value: str) -> None:
    assert parse_env(serialize_env({"NAME": value})) == {"NAME": value}


def test_parse_env_reads_common_forms() -> None:
    text = (
        "# comment\n\nexport A=1\nB = two words  # trailing comment\n"
        "C='single # kept'\nD=\"x\\ny\"\nE=\n"
    )
    assert parse_env(text) == {
        "A": "1",
        "B": "two words",
        "C": "single # kept",
        "D": "x\ny",
        "E": "",
    }


def test_env_files_may_start_with_a_byte_order_mark(tmp_path: Path) -> None:
    source = tmp_path / ".env"
    source.write_bytes(b"\xef\xbb\xbfAPI_KEY=sk-1\r\nDEBUG=1\r\n")
    assert env_module.read_env_file(source) == {"API_KEY": "sk-1", "DEBUG": "1"}


def test_parse_errors_name_the_line_but_not_the_value() -> None:
    with pytest.raises(SecretsError, match="line 2") as caught:
        parse_env('A=1\nB="unterminated sk-secret\n', source=".env")
    assert "sk-secret" not in str(caught.value)


def test_encrypt_env_writes_owner_only_file_beside_untouched_source(tmp_path: Path) -> None:
    source = tmp_path / ".env"
    source.write_text("API_KEY=sk-1\nDEBUG=1\n")

    target = encrypt_env(source, secret_names=["API_KEY"], password=PASSWORD)

    assert target == tmp_path / ".env.encrypt"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert source.read_text() == "API_KEY=sk-1\nDEBUG=1\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == [".env", ".env.encrypt"]
    stored = parse_env(target.read_text())
    assert list(stored) == ["API_KEY_ENCRYPTED", "DEBUG"]
    assert decrypt_env_values(stored, password=PASSWORD) == {"API_KEY": "sk-1", "DEBUG": "1"}


def _write_encrypted(directory: Path, plain: dict[str, str], secrets: list[str]) -> None:
    stored = encrypt_env_values(plain, secret_names=secrets, password=PASSWORD)
    (directory / ".env.encrypt").write_text(serialize_env(stored))


def test_load_precedence_plain_file_over_encrypted_and_process_over_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write_encrypted(
        tmp_path,
        {"A_KEY": "a-encrypted", "B_KEY": "b-encrypted", "C_KEY": "c-encrypted", "MODE": "enc"},
        ["A_KEY", "B_KEY", "C_KEY"],
    )
    (tmp_path / ".env").write_text("A_KEY=a-plain\nMODE=plain\n")
    environ = {"B_KEY": "", "C_KEY": "from-process"}

    applied = load_secrets(password=PASSWORD, environ=environ)

    assert environ == {
        "A_KEY": "a-plain",  # .env overrides .env.encrypt
        "B_KEY": "",  # an existing empty process value still wins
        "C_KEY": "from-process",
        "MODE": "plain",
    }
    assert sorted(applied) == ["A_KEY", "MODE"]


def test_explicit_path_skips_the_plain_overlay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write_encrypted(tmp_path, {"A_KEY": "a-encrypted"}, ["A_KEY"])
    (tmp_path / ".env").write_text("A_KEY=a-plain\n")
    environ: dict[str, str] = {}

    load_secrets(password=PASSWORD, path=tmp_path / ".env.encrypt", environ=environ)

    assert environ == {"A_KEY": "a-encrypted"}


@pytest.mark.parametrize("problem", ["wrong password", "tampered value"])
def test_failed_load_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, problem: str
) -> None:
    monkeypatch.chdir(tmp_path)
    stored = encrypt_env_values(
        {"GOOD_KEY": "g", "BAD_KEY": "b", "PLAIN": "p"},
        secret_names=["GOOD_KEY", "BAD_KEY"],
        password=PASSWORD,
    )
    password = PASSWORD
    if problem == "wrong password":
        password = "wrong"
    else:
        stored["BAD_KEY_ENCRYPTED"] = stored["BAD_KEY_ENCRYPTED"][:-4] + "AAAA"
    (tmp_path / ".env.encrypt").write_text(serialize_env(stored))
    for name in ("GOOD_KEY", "BAD_KEY", "PLAIN"):
        monkeypatch.setenv(name, "placeholder")
        monkeypatch.delenv(name)  # recorded, so the fixture removes anything a bug sets
    before = dict(os.environ)

    with pytest.raises(SecretsError, match="_KEY_ENCRYPTED"):
        load_secrets(password=password)

    assert dict(os.environ) == before


def test_a_wrong_password_names_the_file(tmp_path: Path) -> None:
    stored = encrypt_env_values({"KEY": "k"}, secret_names=["KEY"], password=PASSWORD)
    source = tmp_path / "deploy.env.encrypt"
    source.write_text(serialize_env(stored))

    with pytest.raises(SecretsError) as caught:
        load_secrets(password="wrong", path=source, environ={})

    assert str(caught.value).startswith(f"{source}: KEY_ENCRYPTED: cannot decrypt: wrong password")


def test_load_sets_the_real_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write_encrypted(tmp_path, {"ROBOZ_TEST_LOADED_KEY": "sk-loaded"}, ["ROBOZ_TEST_LOADED_KEY"])
    monkeypatch.setenv("ROBOZ_TEST_LOADED_KEY", "placeholder")
    monkeypatch.delenv("ROBOZ_TEST_LOADED_KEY")
    monkeypatch.setenv("ROBOZ_ENV_PASSWORD", PASSWORD)

    assert load_secrets() == ["ROBOZ_TEST_LOADED_KEY"]
    assert os.environ["ROBOZ_TEST_LOADED_KEY"] == "sk-loaded"


def test_missing_password_is_a_clear_error(tmp_path: Path) -> None:
    _write_encrypted(tmp_path, {"API_KEY": "sk-1"}, ["API_KEY"])
    environ: dict[str, str] = {}

    with pytest.raises(SecretsError, match="API_KEY_ENCRYPTED: a password is needed"):
        load_secrets(path=tmp_path / ".env.encrypt", environ=environ)
    assert environ == {}


def test_no_files_means_nothing_to_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    environ: dict[str, str] = {}
    assert load_secrets(password=PASSWORD, environ=environ) == []
    assert environ == {}


def test_explicit_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SecretsError, match="no such file"):
        load_secrets(password=PASSWORD, path=tmp_path / "absent.env", environ={})
