"""Encrypted ``.env`` storage: parse, encrypt, decrypt, serialize and load secrets.

Stored secrets are renamed ``NAME_ENCRYPTED`` and hold ``roboz:v1:<salt>:<nonce>:<ciphertext>``.
v1 means scrypt (n=2**15, r=8, p=1; memory-hard so guessing passwords offline is costly) and
AES-256-GCM, with the original name as associated data, so a value copied onto another name
fails to decrypt instead of silently becoming the wrong credential.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets as _random
import tempfile
from collections.abc import Iterable, Mapping, MutableMapping
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from roboz.endpoints.errors import SecretsError

ENCRYPTED_SUFFIX = "_ENCRYPTED"
ENCRYPTED_NAMESPACE = "roboz:"
DEFAULT_ENCRYPTED_ENV_PATH = Path(".env.encrypt")
DEFAULT_ENV_PATH = Path(".env")
PASSWORD_ENV = "ROBOZ_ENV_PASSWORD"

_V1_PREFIX = f"{ENCRYPTED_NAMESPACE}v1:"
_SALT_BYTES = 16
_NONCE_BYTES = 12
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**15, 8, 1

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Any version of our ciphertext, including ones this release cannot read.
_CIPHERTEXT = re.compile(rf"^{re.escape(ENCRYPTED_NAMESPACE)}v[0-9]+:")
_LINE = re.compile(r"^\s*(?:export\s+)?(?P<name>[^=\s]+)\s*=\s*(?P<rest>.*)$")
_PLAIN_VALUE = re.compile(r"^[A-Za-z0-9_./:@%+,=-]*$")
_UNESCAPE = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\", "$": "$"}
_ESCAPE = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


# -- plain .env text -----------------------------------------------------------------------


def parse_env(text: str, *, source: str = "env text") -> dict[str, str]:
    """Parse ``NAME=value`` lines; errors name the line, never its value."""
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            raise SecretsError(f"{source}, line {number}: expected NAME=value")
        name = match.group("name")
        if not _NAME.match(name):
            raise SecretsError(f"{source}, line {number}: {name!r} is not a valid variable name")
        values[name] = _parse_value(match.group("rest"), f"{source}, line {number} ({name})")
    return values


def _parse_value(rest: str, where: str) -> str:
    rest = rest.strip()
    if rest.startswith("'"):
        end = rest.find("'", 1)
        if end < 0:
            raise SecretsError(f"{where}: unterminated single-quoted value")
        _expect_only_comment(rest[end + 1 :], where)
        return rest[1:end]
    if rest.startswith('"'):
        chars: list[str] = []
        index = 1
        while index < len(rest):
            char = rest[index]
            if char == "\\" and index + 1 < len(rest):
                following = rest[index + 1]
                chars.append(_UNESCAPE.get(following, "\\" + following))
                index += 2
                continue
            if char == '"':
                _expect_only_comment(rest[index + 1 :], where)
                return "".join(chars)
            chars.append(char)
            index += 1
        raise SecretsError(f"{where}: unterminated double-quoted value")
    # Unquoted: an inline comment starts at whitespace followed by '#'.
    comment = re.search(r"\s#", rest)
    return (rest[: comment.start()] if comment else rest).strip()


def _expect_only_comment(tail: str, where: str) -> None:
    tail = tail.strip()
    if tail and not tail.startswith("#"):
        raise SecretsError(f"{where}: unexpected text after the closing quote")


def serialize_env(values: Mapping[str, str]) -> str:
    """``NAME=value`` lines that ``parse_env`` reads back to the same mapping."""
    lines: list[str] = []
    for name, value in values.items():
        if not _NAME.match(name):
            raise SecretsError(f"{name!r} is not a valid variable name")
        if not _PLAIN_VALUE.match(value):
            value = '"' + "".join(_ESCAPE.get(char, char) for char in value) + '"'
        lines.append(f"{name}={value}")
    return "".join(line + "\n" for line in lines)


def read_env_file(path: Path) -> dict[str, str]:
    try:
        # utf-8-sig: editors on some systems start files with a byte-order mark.
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise SecretsError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise SecretsError(f"{path}: cannot read: {error}") from None
    return parse_env(text, source=str(path))


# -- encryption in memory ------------------------------------------------------------------


def _derive_key(password: str, salt: bytes) -> bytes:
    kdf = Scrypt(salt=salt, length=32, n=_SCRYPT_N, r=_SCRYPT_R, p=_SCRYPT_P)
    return kdf.derive(password.encode("utf-8"))


def _associated_data(name: str) -> bytes:
    return f"{_V1_PREFIX}{name}".encode()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _check_password(password: str) -> None:
    if not isinstance(password, str) or not password:
        raise SecretsError("the password must be a non-empty string")


def encrypt_env_values(
    values: Mapping[str, str], *, secret_names: Iterable[str], password: str
) -> dict[str, str]:
    """Encrypt the chosen entries under ``NAME_ENCRYPTED``; keep the others and their order.

    One salt (so one key derivation) per call; every value gets its own nonce.
    """
    _check_password(password)
    chosen = list(dict.fromkeys(secret_names))
    if not chosen:
        raise SecretsError("choose at least one secret to encrypt")
    for name in chosen:
        if name.endswith(ENCRYPTED_SUFFIX):
            raise SecretsError(
                f"{name}: the {ENCRYPTED_SUFFIX} suffix is reserved for stored secrets; "
                "choose the base name"
            )
        if name not in values:
            raise SecretsError(f"{name}: no such entry to encrypt")
    salt = _random.token_bytes(_SALT_BYTES)
    cipher = AESGCM(_derive_key(password, salt))
    result: dict[str, str] = {}
    for name, value in values.items():
        if name not in chosen:
            result[name] = value
            continue
        stored = name + ENCRYPTED_SUFFIX
        if stored in values:
            raise SecretsError(f"{name}: both {name} and {stored} exist; remove one first")
        nonce = _random.token_bytes(_NONCE_BYTES)
        sealed = cipher.encrypt(nonce, value.encode("utf-8"), _associated_data(name))
        result[stored] = f"{_V1_PREFIX}{_b64(salt)}:{_b64(nonce)}:{_b64(sealed)}"
    return result


def decrypt_env_values(values: Mapping[str, str], *, password: str | None) -> dict[str, str]:
    """Restore ``NAME_ENCRYPTED`` entries to ``NAME``; all or nothing, errors name the entry."""
    result: dict[str, str] = {}
    keys: dict[bytes, AESGCM] = {}  # one derivation per salt, not per value
    for stored, value in values.items():
        if not stored.endswith(ENCRYPTED_SUFFIX):
            if _CIPHERTEXT.match(value):
                raise SecretsError(
                    f"{stored}: holds {ENCRYPTED_NAMESPACE} ciphertext under a name without "
                    f"{ENCRYPTED_SUFFIX}; re-encrypt it with an explicitly chosen base name"
                )
            result[stored] = value
            continue
        name = stored.removesuffix(ENCRYPTED_SUFFIX)
        if not name:
            raise SecretsError(f"{stored}: an encrypted entry needs a base name")
        if name in values:
            raise SecretsError(f"{stored}: {name} is also set in the same file; keep only one")
        if password is None:
            raise SecretsError(f"{stored}: a password is needed to decrypt it")
        _check_password(password)
        salt, nonce, sealed = _split_token(stored, value)
        if salt not in keys:
            keys[salt] = AESGCM(_derive_key(password, salt))
        try:
            plain = keys[salt].decrypt(nonce, sealed, _associated_data(name))
        except InvalidTag:
            raise SecretsError(
                f"{stored}: cannot decrypt: wrong password, or the value was altered or "
                "copied from another name"
            ) from None
        result[name] = plain.decode("utf-8")
    return result


def _split_token(stored: str, value: str) -> tuple[bytes, bytes, bytes]:
    if not value.startswith(_V1_PREFIX):
        raise SecretsError(f"{stored}: not {_V1_PREFIX} ciphertext")
    parts = value[len(_V1_PREFIX) :].split(":")
    try:
        if len(parts) != 3:
            raise ValueError
        salt, nonce, sealed = (_unb64(part) for part in parts)
    except (ValueError, binascii.Error):
        raise SecretsError(f"{stored}: malformed {_V1_PREFIX} ciphertext") from None
    if len(salt) != _SALT_BYTES or len(nonce) != _NONCE_BYTES or len(sealed) < 16:
        raise SecretsError(f"{stored}: malformed {_V1_PREFIX} ciphertext")
    return salt, nonce, sealed


# -- files and the process environment ----------------------------------------------------


def write_private_file(path: Path, text: str) -> None:
    """Replace ``path`` atomically with an owner-only (0600) file."""
    # mkstemp creates the file 0600 from the start, so the content is never world-readable.
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def encrypt_env(
    path: str | os.PathLike[str] = DEFAULT_ENV_PATH,
    *,
    secret_names: Iterable[str],
    password: str,
    output: str | os.PathLike[str] | None = None,
) -> Path:
    """Encrypt chosen entries of a plaintext env file into ``.env.encrypt`` beside it."""
    source = Path(path)
    target = Path(output) if output is not None else source.parent / DEFAULT_ENCRYPTED_ENV_PATH
    if target.resolve() == source.resolve():
        raise SecretsError(f"{source}: the encrypted output would overwrite its source")
    encrypted = encrypt_env_values(
        read_env_file(source), secret_names=secret_names, password=password
    )
    try:
        write_private_file(target, serialize_env(encrypted))
    except OSError as error:
        raise SecretsError(f"{target}: cannot write: {error}") from None
    return target


def _decrypt_file(path: Path, password: str | None) -> dict[str, str]:
    """decrypt_env_values on a file; an error names the file (a wrong password included)."""
    values = read_env_file(path)
    try:
        return decrypt_env_values(values, password=password)
    except SecretsError as error:
        raise SecretsError(f"{path}: {error}") from error


def load_secrets(
    password: str | None = None,
    path: str | os.PathLike[str] | None = None,
    *,
    environ: MutableMapping[str, str] | None = None,
) -> list[str]:
    """Decrypt env files into the process environment; return the names that were set.

    Without ``path``: ``.env.encrypt`` then ``.env`` (the plain file overrides), each only if
    present. With ``path``: that file alone. Names already in the environment keep their
    value, even an empty one. Every entry is decrypted before the environment is touched, so
    a failure changes nothing. ``password`` defaults to ``$ROBOZ_ENV_PASSWORD``.
    """
    target = os.environ if environ is None else environ
    if password is None:
        password = target.get(PASSWORD_ENV) or None
    merged: dict[str, str] = {}
    if path is not None:
        merged = _decrypt_file(Path(path), password)
    else:
        for candidate in (DEFAULT_ENCRYPTED_ENV_PATH, DEFAULT_ENV_PATH):
            if candidate.is_file():
                merged.update(_decrypt_file(candidate, password))
    applied = [name for name in merged if name not in target]
    for name in applied:
        target[name] = merged[name]
    return applied
