"""``roboz env encrypt``: store chosen secrets of a .env file as roboz:v1: ciphertext."""

from __future__ import annotations

import getpass
import os
import re
from pathlib import Path
from typing import Annotated

import typer

from roboz.cli.base import App
from roboz.cli.errors import CliError, CliUsageError
from roboz.endpoints.env import (
    DEFAULT_ENCRYPTED_ENV_PATH,
    DEFAULT_ENV_PATH,
    ENCRYPTED_SUFFIX,
    PASSWORD_ENV,
    encrypt_env,
    read_env_file,
)
from roboz.endpoints.errors import SecretsError

app = App(help="Encrypt secrets stored in .env files.")

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _has_terminal() -> bool:
    """Whether getpass can prompt without echoing: it reads the controlling terminal."""
    try:
        with open("/dev/tty", "rb"):
            return True
    except OSError:
        return False


def _password() -> str:
    from_environment = os.environ.get(PASSWORD_ENV)
    if from_environment:
        return from_environment
    if not _has_terminal():
        # getpass would fall back to echoing stdin, or fail with a bare EOF.
        raise CliUsageError(
            f"no terminal to ask for the password; set {PASSWORD_ENV} in the environment"
        )
    first = getpass.getpass("Password: ")
    if not first:
        raise CliError("the password must not be empty")
    if getpass.getpass("Repeat password: ") != first:
        raise CliError("the passwords do not match; nothing was written")
    return first


@app.command()
def encrypt(
    secret: Annotated[
        list[str],
        typer.Option(
            "--secret",
            help="A variable to encrypt (repeat for more). Other entries stay plaintext.",
            show_default=False,
        ),
    ],
    path: Annotated[Path, typer.Option("--path", help="The plaintext env file.")] = (
        DEFAULT_ENV_PATH
    ),
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing .env.encrypt.")
    ] = False,
) -> None:
    """Write .env.encrypt beside the source (owner-only); the source is left untouched.

    The password is read from ROBOZ_ENV_PASSWORD, or prompted for twice on the terminal.
    """
    for name in secret:
        if not _NAME.match(name):
            raise CliUsageError(f"--secret {name!r}: not an environment variable name")
        if name.endswith(ENCRYPTED_SUFFIX):
            raise CliUsageError(
                f"--secret {name}: the {ENCRYPTED_SUFFIX} suffix is reserved for stored "
                "secrets; give the base name"
            )
    target = path.parent / DEFAULT_ENCRYPTED_ENV_PATH
    if target.exists() and not force:
        # It may hold the only copy of secrets whose plaintext source was since removed.
        raise CliError(f"{target} already exists; pass --force to replace it")
    if not path.is_file():
        raise CliUsageError(f"{path}: no such file")
    try:
        values = read_env_file(path)
    except SecretsError as error:
        raise CliError(str(error)) from error
    missing = [name for name in secret if name not in values]
    if missing:
        raise CliUsageError(f"--secret {', '.join(missing)}: not set in {path}")
    try:
        encrypt_env(path, secret_names=secret, password=_password(), output=target)
    except SecretsError as error:
        raise CliError(str(error)) from error
    count = len(set(secret))
    typer.echo(f"Wrote {target} ({count} secret{'s' if count != 1 else ''} encrypted).")
    typer.echo(f"{path} was not changed; remove it yourself to keep only encrypted storage.")
