"""The one reader for text files a user hands us (inventory, nvidia-smi output,
config.json, snapshots).

Such a file may be anything: a binary, a Latin-1 export, a folder, a dangling
link. Each of those becomes a GpunodeError naming the file and, for bad bytes,
the byte offset and line, instead of a UnicodeDecodeError traceback.
"""

from __future__ import annotations

from pathlib import Path

from gpunode.errors import GpunodeError, InventoryError

# Far larger than any inventory, nvidia-smi -q of 8 GPUs (~60 KiB) or model config;
# a bigger file is a wrong path (a weights shard, an ISO) and is not read into memory.
MAX_BYTES = 64 << 20


def read_text(path: str | Path, *, what: str = "file", error: type[GpunodeError] = InventoryError,
              exact: bool = False) -> str:
    """The file's text, decoded as UTF-8 (a leading BOM is dropped).

    exact=False turns \\r\\n and lone \\r into \\n, as open() does; exact=True keeps
    the bytes as they were (snapshots record what the target printed).
    """
    p = Path(path)
    try:
        size = p.stat().st_size
        if p.is_dir():
            raise error(f"{p}: {what} is a folder, not a file", hint="pass the file inside it")
        if size > MAX_BYTES:
            raise error(f"{p}: {what} is {size} bytes, too large for a text file",
                        hint="check the path; this is probably not the file you meant")
        data = p.read_bytes()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        if p.is_symlink() and not p.exists():
            reason = "it is a symbolic link to a missing file"
        raise error(f"cannot read {what} {p}: {reason}", hint="check the path") from None
    return decode(data, p, what=what, error=error, exact=exact)


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
