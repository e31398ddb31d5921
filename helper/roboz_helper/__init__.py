"""The SafeScripts helper daemon: a small trusted base (msgspec, prctl, stdlib, sandbox-init)."""
