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
    import tempfile  # here: tempfile imports random (~4 ms of every command's start, issue 45)

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
def locked(path: Path, wait: bool = False, create_mode: int | None = None) -> Iterator[bool]:
    """Hold an flock on the file itself from read to replace.

    The replace gives the name a new inode, so an editor that opened the old one and got
    the lock after the first editor finished would read a stale file: after locking, the
    name must still lead to the locked inode, else the lock is taken again on the new one.
    No lock file is left behind. With create_mode a missing file is created empty first.
    Yields False (holding nothing) when another process holds it and wait is False.
    """
    target = real(path)
    flags = os.O_RDONLY | (os.O_CREAT if create_mode is not None else 0)
    while True:
        fd = os.open(target, flags, create_mode or 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                same = os.stat(target).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                yield True
                return
        finally:
            os.close(fd)
