"""Which GPU architectures a released wheel has CUDA code for, read from the wheel itself.

A CUDA library carries its device code in the `.nv_fatbin` section of its ELF file: one or more
fat binaries (magic 0xBA55ED50), each a list of entries, SASS (kind 2, machine code for one
architecture) or PTX (kind 1, compiled by the driver for any newer GPU). `cuobjdump --list-elf`
prints the same list; it is not installed where gpunode runs, so the headers are read here.
Header layout (16-byte fat binary header; entry: kind u16, version u16, header size u32,
payload size u64, ..., architecture u32 at offset 28, flags u64 at 40), as in
https://github.com/n-eiling/cuda-fatbin-decompression (fatbin-decompress.h). Payloads are not
read (they are often zstd-compressed), only skipped.

The flag bit 0x100000 marks arch-specific code: sglang-kernel's sm_90 library holds one sm_90 and
one flagged sm_90 entry of each kernel (sm_90 and sm_90a, tests/test_kernel_sms.py); 0x200000 is
read as family-specific ("f", CUDA 12.9+). Neither changes which GPUs can load the code by major:
SASS runs on GPUs of the same major and an equal or higher minor, so a GPU whose major has no SASS
and for which there is no PTX cannot run the library at all.
"""

from __future__ import annotations

import struct
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

FATBIN_MAGIC = 0xBA55ED50
SASS, PTX = 2, 1
ARCH_SPECIFIC, FAMILY_SPECIFIC = 0x100000, 0x200000


class FatbinError(ValueError):
    """The file is not an ELF library gpunode can read."""


@dataclass(frozen=True, order=True)
class Code:
    sm: int                     # 90 for sm_90
    suffix: str                 # "", "a" (arch-specific) or "f" (family-specific)
    kind: str                   # "sass" or "ptx"

    @property
    def name(self) -> str:
        return f"sm_{self.sm}{self.suffix}" if self.kind == "sass" else f"compute_{self.sm}{self.suffix}"


def _sections(f: BinaryIO) -> dict[str, tuple[int, int]]:
    """name -> (offset, size) of a 64-bit little-endian ELF file's sections."""
    f.seek(0)
    head = f.read(64)
    if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        raise FatbinError("not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", head, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
    f.seek(shoff)
    table = f.read(shentsize * shnum)
    rows = [struct.unpack_from("<IIQQQQ", table, i * shentsize) for i in range(shnum)]
    strtab = rows[shstrndx]
    f.seek(strtab[4])
    names = f.read(strtab[5])
    return {names[r[0]:names.index(b"\0", r[0])].decode("ascii", "replace"): (r[4], r[5]) for r in rows}


def codes(f: BinaryIO) -> Iterator[Code]:
    """Every SASS and PTX entry of every fat binary in the library's .nv_fatbin section."""
    offset, size = _sections(f).get(".nv_fatbin", (0, 0))
    pos, end = offset, offset + size
    while pos + 16 <= end:
        f.seek(pos)
        magic, _version, header, fat_size = struct.unpack("<IHHQ", f.read(16))
        if magic != FATBIN_MAGIC:  # fat binaries are 8-byte aligned, padding between them
            pos += 8
            continue
        entry, stop = pos + header, pos + header + fat_size
        while entry + 48 <= stop:
            f.seek(entry)
            raw = f.read(48)
            kind, _v, entry_header, payload = struct.unpack_from("<HHIQ", raw)
            (sm,) = struct.unpack_from("<I", raw, 28)
            (flags,) = struct.unpack_from("<Q", raw, 40)
            if kind in (SASS, PTX):
                suffix = "a" if flags & ARCH_SPECIFIC else "f" if flags & FAMILY_SPECIFIC else ""
                yield Code(sm, suffix, "sass" if kind == SASS else "ptx")
            if entry_header == 0:
                break
            entry += entry_header + payload
        pos = stop


def wheel_codes(path: str) -> dict[str, set[Code]]:
    """Native library in the wheel -> the codes it holds (libraries without device code left out)."""
    out: dict[str, set[Code]] = {}
    with zipfile.ZipFile(path) as wheel:
        for info in wheel.infolist():
            name = info.filename
            if not (name.endswith(".so") or ".so." in name.rsplit("/", 1)[-1]):
                continue
            with wheel.open(info) as f:  # seekable: only the headers are read, payloads skipped
                try:
                    found = set(codes(f))  # type: ignore[arg-type]
                except FatbinError:
                    continue
            if found:
                out[name] = found
    return out


def summary(by_library: dict[str, set[Code]]) -> dict[str, list[str]]:
    """{'sass': ['sm_80', ...], 'ptx': [...]}: the union over the wheel's libraries, sorted."""
    every = set().union(*by_library.values()) if by_library else set()
    return {kind: [c.name for c in sorted(c for c in every if c.kind == kind)] for kind in ("sass", "ptx")}
