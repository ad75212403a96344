"""The one reader for text files a user hands us (inventory, nvidia-smi output,
config.json, snapshots).

Such a file may be anything: a binary, a Latin-1 export, a folder, a dangling
link. Each of those becomes a GpunodeError naming the file and, for bad bytes,
the byte offset and line, instead of a UnicodeDecodeError traceback.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from gpunode.errors import GpunodeError, InventoryError

# Far larger than any inventory, nvidia-smi -q of 8 GPUs (~60 KiB) or model config;
# a bigger file is a wrong path (a weights shard, an ISO) and is not read into memory.
MAX_BYTES = 64 << 20


def read_text(path: str | Path, *, what: str = "file", error: type[GpunodeError] = InventoryError,
              exact: bool = False, limit: int = MAX_BYTES, hint_large: str = "") -> str:
    """The file's text, decoded as UTF-8 (a leading BOM is dropped).

    exact=False turns \\r\\n and lone \\r into \\n, as open() does; exact=True keeps
    the bytes as they were (snapshots record what the target printed).
    """
    return decode(read_bytes(path, what=what, error=error, limit=limit, hint_large=hint_large), path, what=what,
                  error=error, exact=exact)


def read_bytes(path: str | Path, *, what: str = "file", error: type[GpunodeError] = InventoryError,
               limit: int = MAX_BYTES, start: int = 0, partial: bool = False, hint_large: str = "") -> bytes:
    """At most `limit` bytes from `start` of a regular file; anything else is refused by name.
    A longer file is refused too, unless `partial` (its first `limit` bytes are wanted).

    A FIFO, a device or a socket never ends (or never starts): the open does not wait for a
    writer (O_NONBLOCK), and what it opened is checked before a byte is read, so `--inventory
    /dev/zero` or a named pipe is a message, not a hang or a machine out of memory.
    """
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        if exc.errno == errno.ELOOP:
            reason = "its symbolic links lead round in a loop"
        elif p.is_symlink() and not p.exists():
            reason = "it is a symbolic link to a missing file"
        raise error(f"cannot read {what} {p}: {reason}", hint="check the path") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise error(f"{p}: {what} is a folder, not a file", hint="pass the file inside it")
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{p}: {what} is {_kind(st.st_mode)}, not a regular file",
                        hint="pass a saved copy of the file (e.g. `cat PIPE > file.txt` first)")
        if not partial and st.st_size - start > limit:
            raise error(f"{p}: {what} is {st.st_size} bytes, too large (at most {limit} are read)",
                        hint=hint_large or "check the path; this is probably not the file you meant")
        os.set_blocking(fd, True)
        os.lseek(fd, start, os.SEEK_SET)
        chunks, left = [], limit + (0 if partial else 1)
        while left > 0:  # a file that grows while read is cut at the limit, not followed
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        raise error(f"cannot read {what} {p}: {exc.strerror or type(exc).__name__}", hint="check the path") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise error(f"{p}: {what} grew past {limit} bytes while it was read", hint="read a finished copy of it")
    return data


def missing(path: str | Path, default: str = "does not exist") -> str:
    """Why `path` is not there, as words that follow its name: `default` when nothing is at it.
    A link round in a loop or to nothing is said to be one (issue 41: both were "does not exist",
    which sends the user looking for a file that is there)."""
    p = Path(path)
    try:
        os.stat(p)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symbolic link whose links lead round in a loop"
        if os.path.islink(p):
            return f"is a symbolic link to {os.readlink(p)[:120]!r}, which does not exist"
        if exc.errno == errno.ENOTDIR:
            return "is under a file, not a folder"
        if exc.errno == errno.EACCES:
            return "cannot be reached (permission denied on a folder above it)"
    return default


def _kind(mode: int) -> str:
    return ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")


def decode(data: bytes, path: str | Path, *, what: str = "file", error: type[GpunodeError] = InventoryError,
           exact: bool = False) -> str:
    """Bytes that came from `path` -> text, refusing binary and non-UTF-8 content by offset."""
    nul = data.find(b"\0")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise error(f"{path}: {what} is binary (a NUL byte at offset {nul}, line {line})",
                    hint=f"pass the {what} as text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(f"{path}: {what} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}, "
                    f"line {line})", hint="save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)") from None
    text = text.removeprefix("\ufeff")
    return text if exact else text.replace("\r\n", "\n").replace("\r", "\n")


def surrogate_at(text: str) -> int | None:
    """Where a lone surrogate sits in `text`, or None. Such text comes from bytes that are not UTF-8
    in argv (Python keeps them as U+DC80..U+DCFF) or from a JSON "\\udc80" escape; it cannot be
    encoded again, so it is refused where it enters instead of failing where it is written."""
    for i, ch in enumerate(text):
        if "\ud800" <= ch <= "\udfff":
            return i
    return None


#: filesystems whose files are the kernel's, never a place for a file of ours
PSEUDO_FS = frozenset({"proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs",
                       "configfs", "bpf", "pstore", "efivarfs", "fusectl", "mqueue", "hugetlbfs", "binfmt_misc"})


def check_writable(path: str | Path, *, what: str = "file", flag: str = "",
                   error: type[GpunodeError] = InventoryError) -> Path:
    """Where a file we are about to replace (temp file beside it, rename) really is, refused unless it
    is a regular file or a new name in a folder (issue 41: `--out /dev/null` made /dev/null a regular
    file). Symbolic links are followed, as the replace follows them; called before anything is
    contacted or written."""
    given = f"{flag} {path}" if flag else str(path)
    p = Path(path)
    if not str(path).strip():
        raise error(f"{flag or what} is empty", hint="give a file name")
    try:
        real = Path(os.path.realpath(p, strict=False))
        st = os.stat(real) if os.path.lexists(real) else None
    except OSError as exc:
        why = "its symbolic links lead round in a loop" if exc.errno == errno.ELOOP else exc.strerror
        raise error(f"{given}: cannot write {what} there: {why}", hint="give a regular file's path") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise error(f"{given}: {what} would go where a folder is", hint="give a file name inside it")
    if st is not None and not stat.S_ISREG(st.st_mode):
        via = f" (through the symbolic link to {real})" if real != p.absolute() else ""
        raise error(f"{given}: {what} would replace {_kind(st.st_mode)}{via}; only a regular file or a new "
                    "name is written", hint="give a regular file's path")
    folder = real.parent
    while not os.path.lexists(folder):
        folder = folder.parent
    if not folder.is_dir():
        raise error(f"{given}: {what} would go under {folder}, which is a file, not a folder",
                    hint="check the path")
    fs = _filesystem(real)
    if fs in PSEUDO_FS:
        raise error(f"{given}: {what} would go on the kernel's {fs} filesystem, where no file of ours belongs",
                    hint="give a path on a real disk")
    return real


def _filesystem(path: Path) -> str:
    """The type of the filesystem mounted nearest above path (/proc/self/mounts), "" when unknown."""
    try:
        mounts = Path("/proc/self/mounts").read_text()
    except OSError:
        return ""
    best, kind = "", ""
    text = str(path)
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        if (text == point or text.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, parts[2]
    return kind
