"""The SafeScripts helper daemon: a small trusted base (msgspec, pyroute2, prctl, stdlib)."""
