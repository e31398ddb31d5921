"""Continuation tokens: opaque strings that name a thread and one of its revisions.

Every write to a thread raises its revision by one; a token remembers the revision a client
has seen. The encoding is private: clients only hand tokens back.
"""

from __future__ import annotations

import base64
import binascii

from roboz.threads.errors import ContinuationTokenError

_PREFIX = "ct1."


def encode_token(thread_id: str, revision: int) -> str:
    """The token a client keeps after seeing ``revision`` of ``thread_id``."""
    raw = f"{revision}:{thread_id}".encode()
    return _PREFIX + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_token(token: str, thread_id: str) -> int:
    """The revision in ``token``; raises ContinuationTokenError unless it is ours and for
    ``thread_id``."""
    if not isinstance(token, str) or not token.startswith(_PREFIX):
        raise ContinuationTokenError(f"not a continuation token: {token!r}")
    body = token[len(_PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
        revision_text, _, token_thread = raw.partition(":")
        revision = int(revision_text)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise ContinuationTokenError(f"malformed continuation token: {token!r}") from None
    if revision < 0 or not revision_text.isdigit():
        raise ContinuationTokenError(f"malformed continuation token: {token!r}")
    if token_thread != thread_id:
        raise ContinuationTokenError(
            f"continuation token belongs to thread {token_thread!r}, not {thread_id!r}"
        )
    return revision
