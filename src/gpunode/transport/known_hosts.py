"""OpenSSH known_hosts files, read and edited line by line.

paramiko's HostKeys parser raises on `@revoked` / `@cert-authority` lines (it takes the
marker for the host field and the key type for the base64) and its save() rewrites the whole
file from what it understood: comments, markers, security keys and aliases are lost. Here
each line is kept as its bytes; a line is parsed only to learn its marker, names and key, and
an edit touches only the lines naming one host.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from dataclasses import dataclass
from pathlib import Path

import paramiko

from gpunode import userfiles
from gpunode.errors import HostKeyError

MARKERS = (b"@revoked", b"@cert-authority")


@dataclass
class Line:
    raw: bytes  # the line as in the file, with its newline (if it had one)
    marker: bytes | None = None
    names: bytes | None = None  # the comma-separated host field, or one hashed |1|salt|hash
    key_type: bytes | None = None
    key_blob: bytes | None = None  # the decoded key, None when the line holds no readable key


def parse(data: bytes) -> list[Line]:
    lines = []
    for raw in data.splitlines(keepends=True):
        lines.append(_parse_line(raw))
    return lines


def _parse_line(raw: bytes) -> Line:
    fields = raw.split()
    if not fields or fields[0].startswith(b"#"):
        return Line(raw)
    marker = None
    if fields[0].startswith(b"@"):
        marker, fields = fields[0], fields[1:]
    if len(fields) < 3:
        return Line(raw, marker)
    try:
        blob = base64.b64decode(fields[2], validate=True)
    except (binascii.Error, ValueError):
        blob = None
    return Line(raw, marker, fields[0], fields[1], blob)


def host_matches(names: bytes, name: str) -> bool:
    """True when the host field names `name` exactly, plainly or hashed (no wildcards)."""
    if names.startswith(b"|1|"):
        parts = names.split(b"|")
        if len(parts) != 4:
            return False
        try:
            salt, want = base64.b64decode(parts[2]), base64.b64decode(parts[3])
        except (binascii.Error, ValueError):
            return False
        got = hmac.new(salt, name.encode(), hashlib.sha1).digest()
        return hmac.compare_digest(got, want)
    return name.encode() in names.split(b",")


def to_pkey(line: Line) -> paramiko.PKey | None:
    """The key of a line as paramiko knows it, None for types paramiko cannot check (sk-*)."""
    if line.key_blob is None or line.key_type is None:
        return None
    try:
        return paramiko.PKey.from_type_string(line.key_type.decode("ascii", "replace"), line.key_blob)
    except (paramiko.pkey.UnknownKeyType, paramiko.SSHException, ValueError, TypeError):
        return None


@dataclass
class Trust:
    """What a set of known_hosts files says: keys per host field, and revoked keys."""

    host_keys: paramiko.HostKeys
    revoked: set[bytes]


def load(paths: list[Path]) -> Trust:
    """Read known_hosts files; unreadable lines are skipped as OpenSSH skips them."""
    hosts = paramiko.HostKeys()
    revoked: set[bytes] = set()
    plain: list[Line] = []
    for path in paths:
        if not os.path.lexists(path):
            continue
        # the reader of every user file: a FIFO hung here, a device would fill memory (issue 41)
        data = userfiles.read_bytes(path, what="known_hosts file", error=HostKeyError)
        for line in parse(data):
            if line.marker == b"@revoked" and line.key_blob is not None:
                # A revoked key is refused for every host: the key is compromised, and
                # OpenSSH refuses it whichever host presents it.
                revoked.add(line.key_blob)
            elif line.marker is None and line.names is not None:
                plain.append(line)
            # @cert-authority: host certificates are not supported by paramiko; such a line
            # trusts nothing here (the host then counts as unknown).
    for line in plain:
        key = to_pkey(line)
        if key is None or key.asbytes() in revoked:
            continue
        names = line.names.decode("utf-8", "replace")  # type: ignore[union-attr]
        hosts._entries.append(paramiko.hostkeys.HostKeyEntry(names.split(","), key))  # type: ignore[attr-defined]
    return Trust(hosts, revoked)


def replace_host(data: bytes, name: str, key: paramiko.PKey) -> tuple[bytes, list[str]]:
    """New file contents trusting only `key` for `name`; every other line kept byte for byte.

    Returns the contents and one sentence per line changed (line numbers of the old file).
    """
    out: list[bytes] = []
    changes: list[str] = []
    hashed = False
    for number, line in enumerate(parse(data), 1):
        if line.marker is not None or line.names is None or not host_matches(line.names, name):
            out.append(line.raw)
            continue
        kind = (line.key_type or b"?").decode("ascii", "replace")
        if line.names.startswith(b"|1|") or line.names == name.encode():
            hashed = hashed or line.names.startswith(b"|1|")
            changes.append(f"line {number}: removed {kind} key for {name}")
            continue
        rest = [n for n in line.names.split(b",") if n != name.encode()]
        start = line.raw.index(line.names)
        out.append(line.raw[:start] + b",".join(rest) + line.raw[start + len(line.names):])
        changes.append(f"line {number}: took {name} out of `{line.names.decode('utf-8', 'replace')}` "
                       f"({kind}); the other names keep the key")
    if out and not out[-1].endswith(b"\n"):
        out[-1] += b"\n"
    field = paramiko.HostKeys.hash_host(name) if hashed else name
    out.append(f"{field} {key.get_name()} {key.get_base64()}\n".encode())
    changes.append(f"added {key.get_name()} key for {name}{' (hashed, as before)' if hashed else ''}")
    return b"".join(out), changes
