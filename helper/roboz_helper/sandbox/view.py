"""A run's file view: what the file policies (the profile's and the client's, composed) make
of the paths the profile binds, resolved against the tree when the run starts.

The plan is a list of entries that pid 1 applies per request (``apply_view`` in init_root.c,
where the other mounts are walked), after the profile's binds and before the run exists:

- ``MASK``: a path whose read is not allowed (deny, or ask: nobody can be asked inside a
  sandbox) gets an empty, read-only, mode-0 directory or file mounted over it. Its contents
  cannot be read, listed, created or changed, and a mount point cannot be renamed or
  removed, so the run cannot move it out of the way either. Everything below a masked
  directory is covered, including what someone creates there later: the mask is over the
  directory, not over the files that existed.
- ``READ_ONLY``: a path the run may read but not create in or delete is bound read-only over
  itself (recursively).
- ``WRITABLE``: inside a read-only part, a path where every write is allowed is bound
  writable again (never where the profile's own bind is read-only: a restriction only).
  Also every directory on the way to another entry that sits in a writable mount is bound
  over itself (its mode unchanged): renamed, it would carry the masked or read-only paths
  below it to names no rule matches, for the next run to read; a mount point cannot be
  renamed.

Why masks on matching paths rather than binding only the permitted subtrees: a mask costs
one mount per match, and the walk descends only into directories where some rule could
decide differently below (``FileMatcher.verdicts_below``), so the cost grows with the
matches and the directories on the way to them, not with the tree (a rule on a bare name
such as ``**/.env`` still has to look into every directory). Binding only permitted
subtrees would need one mount per sibling of every match. The race a mask leaves is a
matching *name* created after the walk outside a masked directory (a new ``x/.env``): it
is visible to a run that started before it existed. Each entry carries the inode the walk
saw, and pid 1 refuses to start the run if the path is another inode by then (a rename
racing the start), so a mask never lands on the wrong file.

Files the run itself creates are its own: the view is fixed at the start, so a run may
create a new file whose name a deny glob matches (the guarded tools would refuse that
name); it cannot reach any file that existed and was denied.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from typing import Final

from roboz_helper.file_policy import FileMatcher, composed_verdict

from .spec import SandboxError, ViewEntry

MASK: Final = 1
READ_ONLY: Final = 2
WRITABLE: Final = 3
SKELETON: Final = 4
SKELETON_CHILD: Final = 5


class _Planner:
    def __init__(self, matchers: Sequence[FileMatcher], roots: frozenset[str]) -> None:
        self.matchers = matchers
        self.roots = roots
        self.entries: list[ViewEntry] = []
        # Paths that are mount points in the sandbox whatever their entries: the profile's
        # binds and a skeleton's children.
        self.mount_points = set(roots)

    def allowed(self, path: str, operation: str) -> bool:
        return composed_verdict(self.matchers, path, operation) == "allow"

    def below(self, path: str, operation: str) -> frozenset[str]:
        found: set[str] = set()
        for matcher in self.matchers:
            found |= matcher.verdicts_below(path, operation)
        return frozenset(found)

    def add(self, kind: int, node: _Node, at: int | None = None) -> None:
        st = node.stat()
        entry = ViewEntry(kind, os.fsencode(node.path), st.st_dev, st.st_ino)
        self.entries.insert(len(self.entries) if at is None else at, entry)

    def writes_allowed(self, path: str) -> bool:
        return self.allowed(path, "create") and self.allowed(path, "delete")

    def named_children(self, path: str) -> set[str] | None:
        """The only child names the rules tell apart below ``path`` (FileMatcher.named_below),
        or None when the directory must be listed. This keeps the walk proportional to the
        matches: an anchored rule costs a lookup, not a listing."""
        names: set[str] = set()
        for matcher in self.matchers:
            found = matcher.named_below(path)
            if found is None:
                return None
            names |= found
        return names

    def needs_nothing(self, path: str, mount_rw: bool, bind_rw: bool) -> bool:
        """Whether ``path`` (taken as a directory, the worst case) would get no entry and no
        descent: readable, in the mode of its mount, uniform below."""
        if not self.allowed(path, "read") or (bind_rw and self.writes_allowed(path)) != mount_rw:
            return False
        reads = self.below(path, "read")
        writes = self.below(path, "create") | self.below(path, "delete")
        return reads == {"allow"} and (
            writes == {"allow"} if mount_rw else not (bind_rw and "allow" in writes)
        )

    def children(self, path: str) -> list[_Node]:
        """Every entry of ``path`` but other roots; stat'ed only if an entry needs it."""
        prefix = path.rstrip("/") + "/"
        try:
            with os.scandir(path) as entries:
                found = [_Node.of_entry(prefix + entry.name, entry) for entry in entries]
        except OSError as exc:
            raise SandboxError(f"file policy: cannot list {path}: {exc.strerror}") from None
        return [node for node in found if node.path not in self.roots]

    def skeleton(self, node: _Node, mount_rw: bool, bind_rw: bool) -> None:
        """A directory that may not be listed but has allowed paths below: an empty,
        read-only, enter-only directory over it holding only the children that are (or
        lead to) allowed paths; every other child is absent, not even its name shows."""
        kept = [
            child
            for child in self.children(node.path)
            if not child.is_link
            and (
                self.allowed(child.path, "read")
                or (child.is_dir and "allow" in self.below(child.path, "read"))
            )
        ]
        self.add(SKELETON, node)
        for child in kept:
            self.add(SKELETON_CHILD, child)
            self.mount_points.add(child.path)
        for child in kept:
            self.visit(child, mount_rw, bind_rw)

    def visit(self, node: _Node, mount_rw: bool, bind_rw: bool, writes: bool | None = None) -> None:
        """``mount_rw``: whether the mount ``node`` sits in is writable now; ``bind_rw``:
        whether the profile's own bind is (the most any entry may grant); ``writes``: what
        the parent already knows of every child's writes (None: ask the policy)."""
        if node.is_link:
            return  # what it points to is decided where that is
        path = node.path
        if not self.allowed(path, "read"):
            if node.is_dir and "allow" in self.below(path, "read"):
                self.skeleton(node, mount_rw, bind_rw)
            else:
                self.add(MASK, node)
            return
        own_rw = bind_rw and (self.writes_allowed(path) if writes is None else writes)
        if own_rw != mount_rw:
            self.add(WRITABLE if own_rw else READ_ONLY, node)
        if not node.is_dir:
            return
        mark = len(self.entries)
        self.descend(node, own_rw, bind_rw)
        if len(self.entries) > mark and own_rw and mount_rw and path not in self.mount_points:
            # A directory on the way to an entry, in a writable mount and no mount point
            # itself: renamed by the run, it would carry what is masked (or read-only) below
            # it to a name the rules do not match, readable by the next run. Bound over
            # itself in its own mode, it is a mount point, which rename(2) refuses (EBUSY).
            self.add(WRITABLE, node, at=mark)

    def descend(self, node: _Node, own_rw: bool, bind_rw: bool) -> None:
        """The entries below a readable directory ``node`` whose own mode is ``own_rw``."""
        path = node.path
        reads = self.below(path, "read")
        below_writes = self.below(path, "create") | self.below(path, "delete")
        descend = (
            reads != {"allow"}
            or (own_rw and below_writes != {"allow"})
            or (not own_rw and bind_rw and "allow" in below_writes)
        )
        if not descend:
            return
        # Every child's writes, when the verdicts below say them all at once.
        known = (
            True if below_writes == {"allow"} else False if "allow" not in below_writes else None
        )
        prefix = path.rstrip("/") + "/"
        names = self.named_children(path)
        # A name no rule spells (NUL is in no file name) stands for every unnamed child.
        if names is not None and self.needs_nothing(prefix + "\0", own_rw, bind_rw):
            for name in sorted(names):
                child = prefix + name
                if child in self.roots:
                    continue
                try:
                    child_st = os.lstat(child)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    raise SandboxError(
                        f"file policy: cannot examine {child}: {exc.strerror}"
                    ) from None
                self.visit(_Node.of_stat(child, child_st), own_rw, bind_rw, known)
            return
        for node_below in self.children(path):  # other roots: planned as their own
            self.visit(node_below, own_rw, bind_rw, known)


class _Node:
    """A path met by the walk: its type from the directory entry, its inode only when an
    entry is made for it (most files are never stat'ed)."""

    __slots__ = ("_st", "is_dir", "is_link", "path", "source")

    def __init__(self, path: str, is_dir: bool, is_link: bool) -> None:
        self.path = path
        self.is_dir = is_dir
        self.is_link = is_link
        self._st: os.stat_result | None = None
        self.source: os.DirEntry[str] | None = None

    @classmethod
    def of_entry(cls, path: str, entry: os.DirEntry[str]) -> _Node:
        node = cls(path, entry.is_dir(follow_symlinks=False), entry.is_symlink())
        node.source = entry
        return node

    @classmethod
    def of_stat(cls, path: str, st: os.stat_result) -> _Node:
        node = cls(path, stat.S_ISDIR(st.st_mode), stat.S_ISLNK(st.st_mode))
        node._st = st
        return node

    def stat(self) -> os.stat_result:
        if self._st is None:
            try:
                self._st = (
                    self.source.stat(follow_symlinks=False)
                    if self.source is not None
                    else os.lstat(self.path)
                )
            except OSError as exc:
                raise SandboxError(
                    f"file policy: cannot examine {self.path}: {exc.strerror}"
                ) from None
        return self._st


def plan_view(
    matchers: Sequence[FileMatcher], roots: Sequence[tuple[str, bool]], workdir: str
) -> tuple[ViewEntry, ...]:
    """The entries for the profile's binds ``roots`` (path, writable), parents first."""
    if not matchers:
        return ()
    planner = _Planner(matchers, frozenset(path for path, _ in roots))
    for root, writable in roots:
        try:
            st = os.lstat(root)
        except OSError as exc:
            raise SandboxError(f"file policy: cannot examine {root}: {exc.strerror}") from None
        if (
            root == workdir
            and not planner.allowed(root, "read")
            and "allow" not in planner.below(root, "read")
        ):
            raise SandboxError(
                f"file policy: nothing in the workdir {root} may be read, so nothing could "
                "run there; allow reading it or a part of it"
            )
        planner.visit(_Node.of_stat(root, st), writable, writable)
    return tuple(planner.entries)
