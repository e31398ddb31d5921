"""The SafeScripts helper daemon (trusted computing base: msgspec, pyroute2, python-prctl, stdlib)."""
