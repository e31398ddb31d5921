"""Errors raised by the thread model and its store, each naming what went wrong."""

from __future__ import annotations


class ThreadError(Exception):
    """Base of every error raised by ``roboz.threads``."""


class UnmappedContentTypeError(ThreadError, TypeError):
    """A content block whose type has no entry in AGENT_CONTENT_MODEL_BY_TYPE.

    Raised instead of silently dropping the block on write or rebuilding it without its
    payload on read.
    """


class ThreadNotFoundError(ThreadError, LookupError):
    """No thread with the requested id exists in the store."""


class MessageNotFoundError(ThreadError, LookupError):
    """The thread has no message at the requested sequence number."""


class MessageFinalizedError(ThreadError):
    """An in-place update was attempted on a message that already reached a terminal status."""


class MessageGeneratingError(ThreadError, ValueError):
    """The operation needs finished messages but one is still being generated."""


class ContinuationTokenError(ThreadError, ValueError):
    """A continuation token that is malformed, belongs to another thread, or is from the future."""


class ThreadReadOnlyError(ThreadError):
    """The thread is owned by a surface outside RoboZ and refuses new messages."""


RobotoThreadReadOnlyException = ThreadReadOnlyError
"""The name the roboto thread model uses for :class:`ThreadReadOnlyError`."""


class SchemaVersionError(ThreadError):
    """The database was written with a schema this version of RoboZ does not know."""


class CorruptRecordError(ThreadError, ValueError):
    """A stored row could not be decoded; the row itself is left untouched."""


class UnencodableTextError(ThreadError, ValueError):
    """Text that cannot be stored because it is not valid Unicode: a lone surrogate, such as
    a ``\\ud800`` escape decodes to. The error names the field; nothing was written."""


class CompressionError(ThreadError, ValueError):
    """A compressed variant breaks an invariant of the compression tiers."""


class DeltaApplyError(ThreadError, ValueError):
    """A delta does not fit the messages a client holds (it skipped part of the stream)."""


class ThreadBusyError(ThreadError):
    """Another live run holds the thread; two runs never write one thread at once."""


class ThreadStoreError(ThreadError):
    """The store's database cannot be used (corrupt, not a database, read-only, ...)."""


class ThreadPermissionError(ThreadError, PermissionError):
    """The caller may read the thread but not do this to it (only its creator or an admin of
    its organization may change it)."""
