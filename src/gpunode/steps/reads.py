"""The passes that many steps share in the batch: ONE `stat`, ONE `sha256sum` and ONE `grep`
over every path that the steps of a run ask about (steps/base.Pass).

Files, directories and symlinks (steps/files.py) ask the stat pass for their path, and a File
either the sha256sum pass or, when it is small and not sensitive, the grep pass, which reads it
whole: its hash is then taken here, so a no-op starts no sha256sum, and a file that differs
already has the old content its diff needs, without a probe of its own. Larger and sensitive
files are hashed on the target, and a secret never crosses the wire. The limit is on the desired
content: a managed file that grew on the target is read whole until a run rewrites it (the stat
pass has its size, which must match what grep printed). Each step then gets the output its own
probe would have printed, or None where the passes cannot say exactly that (a file whose hash
differs, whose old content the diff needs; a directory path that is a symlink; an answer that
does not parse): it then runs its own probe.

Venv and weights probes print one small file the engine wrote (a manifest): in the batch they run
without that `cat` (FileRead), the same grep reads every manifest, and each gets the file's lines
back in its own place.

All three run in the batch's own shell, as a function call (engine/inline.py): no fork each.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from gpunode import shell
from gpunode.steps.base import Batched, Pass, Probe, inline

# Records of four NUL-terminated fields: name, type, "mode user group size", %N (name -> target).
# "/" goes first: when it is not in the answer, this stat is not GNU's and every step probes itself.
_STAT = inline("QUOTING_STYLE=literal stat --printf '%n\\0%F\\0%a %U %G %s\\0%N\\0' -- / \"$@\" 2>/dev/null; :")
# Regular files only (a fifo would block the read); -z: "hash  name" records end in NUL.
# Both are sent without their file's last newline, as they were before they were files: the batch
# recorded on a target (engine/recorded.py) keeps its digest, so an upgrade costs no round trip.
_HASH = inline(shell.script("gpunode.steps", "reads_hash.sh").rstrip("\n"))
# The manifests (FileRead), then, after "--", the small files read whole (not through a symlink:
# the stat pass reports the link), each line as "path NUL line" (-H -Z): no content can pass for
# another file's.
_READ = inline(shell.script("gpunode.steps", "reads_grep.sh").rstrip("\n"))
# Files up to this size come back whole from the grep; a managed unit or env file is ~1 KiB.
READ_LIMIT = 64 * 1024


def _stats(output: Probe, paths: list[Hashable]) -> dict[str, tuple[str, str, str]] | None:
    fields = output.output.split("\0")
    out: dict[str, tuple[str, str, str]] = {}
    for k in range(0, len(fields) - 3, 4):
        name, kind, meta, shown = fields[k:k + 4]
        target = shown[len(name) + 4:] if shown.startswith(name + " -> ") else ""
        out[name] = (kind, meta, target)
    return out if out.get("/", ("",))[0] == "directory" else None


def _hashes(output: Probe, paths: list[Hashable]) -> dict[str, str]:
    out: dict[str, str] = {}
    for record in output.output.split("\0"):
        digest, sep, name = record.partition(" ")
        if sep and len(digest) == 64 and name[:1] in (" ", "*"):
            out[name[1:]] = digest
    return out


def _contents(output: Probe, asked: list[Hashable]) -> dict[str, str]:
    """grep -aHZ's "path NUL line" lines -> each file's text (a last line gets its newline)."""
    out: dict[str, str] = {}
    for line in output.output.split("\n"):
        path, sep, text = line.partition("\0")
        if sep:
            out[path] = out.get(path, "") + text + "\n"
    return out


def _grep(asked: list[Hashable]) -> list[str]:
    """Asked as (path, whole): the manifests first, then "--" and the files read whole."""
    pairs = [(str(a[0]), bool(a[1])) for a in asked if isinstance(a, tuple)]
    manifests = [path for path, whole in pairs if not whole]
    files = [path for path, whole in pairs if whole]
    return ["sh", "-c", _READ, "sh", *manifests, "--", *files]


STAT = Pass("stat", lambda paths: ["sh", "-c", _STAT, "sh", *map(str, paths)], _stats, rank=10)
HASH = Pass("sha256sum", lambda paths: ["sh", "-c", _HASH, "sh", *map(str, paths)], _hashes, rank=20)
READ = Pass("grep", _grep, _contents, rank=30)


def file_like(kind: str, probe: Sequence[str], path: str, sha: str, limit: int, whole: bool) -> Batched:
    """A File ("file"), Directory ("dir") or Symlink ("link") at `path`, from the passes; a File
    also says its desired sha256, how much of its old content the diff may show (0: none, it is
    sensitive) and whether grep reads it whole."""
    asks: tuple[tuple[Pass, Hashable], ...] = ((STAT, path),)
    if kind == "file":
        asks += ((READ, (path, True)),) if whole else ((HASH, path),)

    def answer(own: Probe | None, got: tuple[Any, ...]) -> Probe | None:
        stats = got[0]
        if stats is None:
            return None  # not GNU's stat: nothing may be taken as "missing"
        more = got[1] if kind == "file" else {}
        return _file_like(kind, path, sha, limit, stats, {} if whole else more, more if whole else {})

    return Batched(tuple(probe), asks=asks, answer=answer)


def _file_like(kind: str, path: str, sha: str, limit: int, stats: dict, hashes: dict[str, str],
               contents: dict[str, str]) -> Probe | None:
    if path not in stats:
        return Probe(0, "missing\n")
    ftype, meta, target = stats[path]
    if ftype == "symbolic link":
        if kind == "dir":
            return None  # [ -d ] follows the link: its own probe says what it points to
        return Probe(0, f"link {target}\n" if kind == "file" else f"link\n{target}\n")
    if kind == "dir":
        if ftype != "directory":
            return Probe(0, f"other {ftype}\n")
        return Probe(0, "dir " + meta.rsplit(" ", 1)[0] + "\n")
    # GNU stat calls a file of 0 bytes a "regular empty file"; the File probe's [ -f ] a file.
    if kind == "link" or ftype not in ("regular file", "regular empty file"):
        return Probe(0, f"other {ftype}\n")
    if path not in hashes:
        return _read_whole(sha, limit, meta, contents.get(path))
    digest = hashes[path]
    if digest != sha and limit:
        return None  # changed: its own probe sends the old content for the diff
    return Probe(0, f"file {meta}\n{digest}\n")


def _read_whole(sha: str, limit: int, meta: str, text: str | None) -> Probe | None:
    """A file's own probe output from its lines as grep printed them, or None where those lines
    may not be the file's exact bytes (unreadable, not UTF-8, changed between stat and grep)."""
    size = int(meta.rsplit(" ", 1)[1])
    if (text is None and size) or "\ufffd" in (text or ""):
        return None  # grep could not read it, or bytes that are not UTF-8 were replaced on the way
    data = (text or "").encode()
    # grep ends every line with a newline, the last one included: one byte more than the file
    # then means that the file does not end with one.
    if len(data) == size + 1 and data.endswith(b"\n"):
        data = data[:-1]
    if len(data) != size:
        return None
    digest = hashlib.sha256(data).hexdigest()
    if digest == sha:
        return Probe(0, f"file {meta}\n{digest}\n")
    # What `head -c LIMIT` would have printed, decoded as the transport decodes it.
    old = data[:limit].decode("utf-8", "replace")
    return Probe(0, f"file {meta}\n{digest}\n{old}")


@dataclass(frozen=True)
class FileRead:
    """A probe script that prints one small file the engine wrote (a manifest) after `after`: in
    the batch it runs as `without` (the script less that `cat`), the grep pass reads the file, at
    <args[arg]>/<name>, with the others, and its lines are put back after `after`. `inline`:
    `without` leaves the shell as it found it (engine/inline.py), so it runs as a function call."""

    script: str
    without: str
    arg: int
    name: str
    after: str
    inline: bool = False

    def __post_init__(self) -> None:
        if self.inline:
            inline(self.without)

    def batched(self, *args: str) -> Batched:
        """The probe `sh -c script sh ARGS` as a part of the batch."""
        path = f"{args[self.arg]}/{self.name}"

        def answer(own: Probe | None, got: tuple[Any, ...]) -> Probe | None:
            assert own is not None
            head, sep, tail = own.output.partition(self.after)
            if not sep:
                return None  # cut short before the file's place: its own probe says what happened
            return Probe(own.exit_code, head + sep + got[0].get(path, "") + tail)

        return Batched(tuple(shell.sh(self.script, *args)), tuple(shell.sh(self.without, *args)),
                       ((READ, (path, False)),), answer)
