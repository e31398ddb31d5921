"""The helper's listening socket: taken from systemd (socket activation) or bound here."""

from __future__ import annotations

import contextlib
import grp
import os
import socket
import stat
from dataclasses import dataclass

from roboz_helper.policy import ServerConfig
from roboz_helper.systemd import take_listen_fds

# Connections wait here until the helper accepts them; it listens from the moment it binds,
# so a client that connects as soon as the socket file exists is queued, not refused, while
# the helper is still starting (reclaiming a crashed predecessor's runs can take seconds).
BACKLOG = 1024


class StartupError(RuntimeError):
    """The daemon cannot start (socket in use, bad activation fd, ...)."""


@dataclass
class ListeningSocket:
    sock: socket.socket
    path: str
    # Inode of the socket file we bound, None when systemd passed it to us.
    owned_inode: int | None

    def remove(self) -> None:
        """Unlink the socket file, but only if it is still the one we bound: an activation
        socket belongs to systemd, and a path re-bound by a newer helper belongs to it."""
        if self.owned_inode is None:
            return
        with contextlib.suppress(OSError):
            if os.lstat(self.path).st_ino == self.owned_inode:
                os.unlink(self.path)


def open_listening_socket(path: str, config: ServerConfig) -> ListeningSocket:
    fds = take_listen_fds()
    if not fds:
        return _bind(path, config)
    if len(fds) != 1:
        raise StartupError(f"expected one activation socket, got {len(fds)}")
    sock = socket.socket(fileno=fds[0])
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        raise StartupError(f"activation fd {fds[0]} is not a Unix stream socket")
    return ListeningSocket(sock=sock, path=str(sock.getsockname() or path), owned_inode=None)


def _bind(path: str, config: ServerConfig) -> ListeningSocket:
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise StartupError(f"{path} exists and is not a socket; refusing to replace it")
        if _is_live(path):
            raise StartupError(f"{path} is in use by a running helper")
        os.unlink(path)  # stale socket of a helper that did not shut down cleanly
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    # The socket must never exist with wider permissions than configured, not even briefly.
    old_umask = os.umask(0o777)
    try:
        sock.bind(path)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise StartupError(f"cannot bind {path}: {exc.strerror}") from None
    finally:
        os.umask(old_umask)
    try:
        if config.socket_group is not None:
            os.chown(path, -1, grp.getgrnam(config.socket_group).gr_gid)
        os.chmod(path, config.socket_mode)
    except (OSError, KeyError) as exc:
        sock.close()
        os.unlink(path)
        raise StartupError(f"cannot set owner/mode of {path}: {exc}") from None
    return ListeningSocket(sock=sock, path=path, owned_inode=os.stat(path).st_ino)


def _is_live(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as probe:
        try:
            probe.connect(path)
        except OSError:
            return False
    return True
