"""Local files that survive a crash: whole-file replacement and folder fsync.

A rename is atomic, but not durable until the folder holding it is flushed; and the data
must reach the disk before the rename does, or a crash can leave the new name on an empty
file. Every local file gpunode rewrites (known_hosts, the inventory, snapshots) goes
through here.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


def fsync_dir(folder: Path) -> None:
    """Make renames and new names in `folder` durable."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def real(path: Path) -> Path:
    """The file a path names, through symlinks: editing it keeps the links as they are."""
    return Path(os.path.realpath(path))


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace a file's contents in one step: temp file beside it, fsync, rename, fsync folder.

    A symlinked file stays a symlink (its target is replaced); an existing file keeps its mode.
    """
    path = real(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        mode = path.stat().st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


@contextlib.contextmanager
def locked(path: Path, wait: bool = False) -> Iterator[bool]:
    """Hold an flock on `<file>.lock` beside the real file for a read-modify-replace.

    The lock is on a sibling, not the file: the replace gives the file a new inode, and a
    lock on the old one would let the next editor in too early. Yields False (and holds
    nothing) when another process holds it and wait is False.
    """
    target = real(path)
    lock = target.with_name(f".{target.name}.lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)
