"""The web UI of ``roboz serve``: static files shipped in the package, served at ``/``."""

from roboz.server.ui.mount import mount_ui

__all__ = ["mount_ui"]
