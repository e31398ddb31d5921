"""Permission policy files of ``roboz mcp serve``: the file-policy TOML format
(``roboz_helper.file_policy``, the one parser both the guarded tools and the helper use),
loaded through ``PermissionPolicy.from_toml`` / ``from_file``.

Decoding rejects unknown keys and wrong types, and validation rejects what decodes but makes
no sense (a relative or missing base, a bad pattern); every error names the field, e.g.
``allow[1].operations[0]``, and nothing is served.
"""

from __future__ import annotations

import os

from roboz_helper.file_policy import FilePolicyError

from roboz.shed.sandbox import PermissionPolicy

# The name this module has always raised; it is the shared format's error.
PolicyFileError = FilePolicyError


def parse_policy_file(text: str | bytes, *, origin: str = "policy") -> PermissionPolicy:
    """Decode and check policy TOML; raises PolicyFileError naming the offending field."""
    return PermissionPolicy.from_toml(text, origin=origin)


def load_policy_file(path: str | os.PathLike[str]) -> PermissionPolicy:
    return PermissionPolicy.from_file(path)
