"""Bearer tokens of the thread API, kept in the thread store so every ``roboz serve`` process
over one database accepts the same tokens and a revocation reaches all of them.

A token reads ``rbz_<id>_<secret>``. Only the SHA-256 of the secret is stored: the secret is
256 random bits, so a slow password hash would add nothing but latency to every request, and
a leaked table gives no usable token. The id finds the row; the hash is compared in constant
time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from roboz.threads.identity import Caller
from roboz.threads.record import utc_now

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager

    from roboz.threads._sql import Conn

_TOKEN = re.compile(r"rbz_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
_TOKEN_ID = re.compile(r"[0-9a-f]{16}")
_KNOWN = 4096
"""Tokens a store remembers parsed and hashed."""


@dataclass(frozen=True)
class ApiTokenInfo:
    """A stored token, without its secret."""

    token_id: str
    user_id: str
    org_id: str
    admin: bool
    label: str | None
    created: datetime
    revoked: datetime | None


def api_token_id(text: str) -> str | None:
    """The id a token id or a whole token names (the secret left behind); None when
    ``text`` is neither, so a caller need never echo what it was given."""
    match = _TOKEN.fullmatch(text)
    if match is not None:
        return match.group(1)
    return text if _TOKEN_ID.fullmatch(text) else None


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


class TokenMixin:
    """Create, check, list and revoke API tokens (mixed into the stores)."""

    if TYPE_CHECKING:
        _read: Callable[[], AbstractContextManager[Conn]]
        _write: Callable[[str], AbstractContextManager[Conn]]

    def create_api_token(self, caller: Caller, *, label: str | None = None) -> tuple[str, str]:
        """A new token acting as ``caller``: returns (token id, the token). The token itself
        is shown this once; the store keeps only a hash of its secret."""
        token_id = secrets.token_hex(8)
        secret = secrets.token_urlsafe(32)
        with self._write(f"api-token:{token_id}") as conn:
            conn.execute(
                "INSERT INTO api_tokens (token_id, secret_hash, user_id, org_id, admin, label, "
                "created) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    token_id,
                    _digest(secret),
                    caller.user_id,
                    caller.org_id,
                    int(caller.admin),
                    label,
                    utc_now().isoformat(),
                ),
            )
        return token_id, f"rbz_{token_id}_{secret}"

    def verify_api_token(self, token: str) -> Caller | None:
        """The caller ``token`` acts as, or None when it is malformed, unknown or revoked.

        Every call reads the token's row (a revocation counts at once, from any process);
        a token seen before skips parsing and hashing (``_known``)."""
        known: dict[str, tuple[str, str, Caller]] = self.__dict__.setdefault("_known", {})
        seen = known.get(token)
        if seen is None:
            match = _TOKEN.fullmatch(token)
            if match is None:
                return None
            token_id, secret = match.groups()
            digest = _digest(secret)
        else:
            token_id, digest, _ = seen
        with getattr(self, "_peek", self._read)() as conn:  # one statement: no transaction
            row = conn.execute(
                "SELECT secret_hash, user_id, org_id, admin FROM api_tokens "
                "WHERE token_id = ? AND revoked IS NULL",
                (token_id,),
            ).fetchone()
        if row is None or not hmac.compare_digest(row[0], digest):
            return None
        if seen is not None:
            return seen[2]
        caller = Caller(user_id=row[1], org_id=row[2], admin=bool(row[3]))
        if len(known) >= _KNOWN:
            known.clear()
        known[token] = (token_id, digest, caller)
        return caller

    def revoke_api_token(self, token_id: str) -> bool:
        """Revoke a token (by its id or the whole token); False when no live token has it."""
        found = api_token_id(token_id)
        if found is None:
            return False
        token_id = found
        with self._write(f"api-token:{token_id}") as conn:
            row = conn.execute(
                "UPDATE api_tokens SET revoked = ? WHERE token_id = ? AND revoked IS NULL "
                "RETURNING token_id",
                (utc_now().isoformat(), token_id),
            ).fetchone()
        return row is not None

    def list_api_tokens(self) -> list[ApiTokenInfo]:
        """Every token, revoked ones included, oldest first."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT token_id, user_id, org_id, admin, label, created, revoked "
                "FROM api_tokens ORDER BY created, token_id"
            ).fetchall()
        return [
            ApiTokenInfo(
                token_id=r[0],
                user_id=r[1],
                org_id=r[2],
                admin=bool(r[3]),
                label=r[4],
                created=datetime.fromisoformat(r[5]),
                revoked=None if r[6] is None else datetime.fromisoformat(r[6]),
            )
            for r in rows
        ]
