"""apply_patch: literal, byte-preserving, atomic file edits under a PermissionPolicy."""

from roboz.shed.patch.engine import PatchError, PatchOutcome, apply_patch, replace_bytes

__all__ = ["PatchError", "PatchOutcome", "apply_patch", "replace_bytes"]
