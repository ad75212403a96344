"""One pass per kind inside the batched probe: no process start per step.

A step's probe is data (an argv). The probes of files, directories and symlinks
(steps/files.py) and of services (steps/systemd.py) are recognised by their argv and
answered together: ONE `stat` and ONE `sha256sum` over every path, ONE `systemctl show`
over every unit. Each step then gets the output its own probe would have printed, so its
check stays the same pure function. Where the pass cannot say exactly that (a file whose
hash differs, whose old content the diff needs; a directory path that is a symlink; an
answer that does not parse), the step gets None and the runner runs its own probe.

The services' one `systemctl show` and each Packages step's `dpkg-query` run inside shell text
that reuses their last answer while builtins say it still holds (engine/reuse.py).

Venv and weights probes read one manifest each (steps/base.FileRead): they run without that
`cat` and ONE grep reads every manifest; each gets the file's lines back in its own place.

That grep also reads whole every File of at most READ_LIMIT bytes that is not sensitive (units,
env files, scripts): its hash is then taken here, so a no-op starts no sha256sum, and a file that
differs already has the old content its diff needs, without a probe of its own. Larger and
sensitive files are hashed on the target as before, and a secret never crosses the wire. The
limit is on the desired content: a managed file that grew on the target is read whole until a
run rewrites it (the stat pass has its size, which must match what grep printed).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpunode.engine import inline, reuse
from gpunode.steps import apt, files, systemd, venv, weights
from gpunode.steps.base import FileRead, Probe

# Records of four NUL-terminated fields: name, type, "mode user group size", %N (name -> target).
# "/" goes first: when it is not in the answer, this stat is not GNU's and every step probes itself.
_STAT = inline.mark("QUOTING_STYLE=literal stat --printf '%n\\0%F\\0%a %U %G %s\\0%N\\0' -- / \"$@\" 2>/dev/null; :")
# Regular files only (a fifo would block the read); -z: "hash  name" records end in NUL and
# names are not escaped.
_HASH = inline.mark("""gn_n=$#
for gn_f; do if [ -f "$gn_f" ] && [ ! -L "$gn_f" ]; then set -- "$@" "$gn_f"; fi; done
shift "$gn_n"
[ "$#" -eq 0 ] || sha256sum -z -- "$@" 2>/dev/null; :""")
_SHOW = ["systemctl", "show", *(f"-p{p}" for p in systemd.PROPERTIES), "--"]
# The manifests that venv and weights probes print (steps/base.FileRead), then, after "--", the
# small files read whole (not through a symlink: the stat pass reports the link), all in one
# grep: each line comes as "path NUL line" (-H -Z), so no content can pass for another file's.
_READ = inline.mark("""gn_n=$# gn_l=
for gn_f; do
  if [ "$gn_f" = -- ]; then gn_l=1
  elif [ -f "$gn_f" ] && { [ -z "$gn_l" ] || [ ! -L "$gn_f" ]; }; then set -- "$@" "$gn_f"; fi
done
shift "$gn_n"
[ "$#" -eq 0 ] || grep -aHZ '' -- "$@" 2>/dev/null; :""")
# Files up to this size come back whole from the grep above; a managed unit or env file is ~1 KiB.
READ_LIMIT = 64 * 1024
_READS: dict[str, FileRead] = {r.script: r for r in (venv.READ, *weights.READS)}
for _r in _READS.values():
    if _r.inline:
        inline.mark(_r.without)
_DPKG = ["dpkg-query", "-W", f"-f={apt.FORMAT}", "--"]


def _kind(argv: Sequence[str]) -> str:
    if len(argv) == 8 and list(argv[:4]) == ["sh", "-c", files._FILE_PROBE, "sh"]:
        return "file"
    if len(argv) == 5 and list(argv[:4]) == ["sh", "-c", files._DIR_PROBE, "sh"]:
        return "dir"
    if len(argv) == 5 and list(argv[:4]) == ["sh", "-c", files._LINK_PROBE, "sh"]:
        return "link"
    if len(argv) == len(_SHOW) + 1 and list(argv[:-1]) == _SHOW:
        return "unit"
    if len(argv) >= 4 and argv[0] == "sh" and argv[1] == "-c" and argv[3] == "sh" and argv[2] in _READS:
        read = _READS[argv[2]]
        if len(argv) > 4 + read.arg:
            return "read"
    return ""


@dataclass
class Folded:
    """The argvs to run (unrecognised probes as they are, then one per pass) and how to map
    their results back onto the original probes."""

    argvs: list[list[str]]
    kinds: list[str]
    originals: list[list[str]]
    own: list[int] = field(default_factory=list)  # index into argvs of each unrecognised probe
    paths: list[str] = field(default_factory=list)
    hashed: list[str] = field(default_factory=list)
    whole: list[str] = field(default_factory=list)  # files read whole by the grep, not hashed there
    units: list[str] = field(default_factory=list)
    partial: list[int] = field(default_factory=list)  # probes run without their file read, after own
    reads: list[str] = field(default_factory=list)

    def unfold(self, results: Sequence[Probe]) -> list[Probe | None]:
        out: list[Probe | None] = [None] * len(self.originals)
        it = iter(results)
        own = {i: next(it) for i in self.own}
        partial = {i: next(it) for i in self.partial}
        stats = _stats(next(it).output) if self.paths else {}
        kinds = self.kinds
        if self.paths and stats.get("/", ("",))[0] != "directory":
            kinds = [k if k in ("", "unit", "read") else "?" for k in kinds]
        hashes = _hashes(next(it).output) if self.hashed else {}
        contents = _contents(next(it).output) if self.reads or self.whole else {}
        shown = next(it) if self.units else None
        blocks = _blocks(shown, len(self.units)) if shown is not None else None
        for i, (kind, argv) in enumerate(zip(kinds, self.originals, strict=True)):
            if not kind:
                out[i] = own[i]
            elif kind == "read":
                out[i] = _put_back(partial[i], _READS[argv[2]], contents.get(_read_path(argv), ""))
            elif kind == "?":
                out[i] = None
            elif kind == "unit":
                out[i] = Probe(0, blocks[self.units.index(argv[-1])]) if blocks is not None else None
            else:
                out[i] = _file_like(kind, argv, stats, hashes, contents)
        return out


def fold(argvs: Sequence[Sequence[str]]) -> Folded:
    kinds = [_kind(a) for a in argvs]
    folded = Folded([], kinds, [list(a) for a in argvs])
    for i, (kind, argv) in enumerate(zip(kinds, argvs, strict=True)):
        if not kind:
            folded.own.append(i)
            dpkg = len(argv) > len(_DPKG) and list(argv[:len(_DPKG)]) == _DPKG
            folded.argvs.append(reuse.packages(argv) if dpkg else list(argv))
        elif kind == "unit":
            if argv[-1] not in folded.units:
                folded.units.append(argv[-1])
        elif kind == "read":
            folded.partial.append(i)
            if _read_path(argv) not in folded.reads:
                folded.reads.append(_read_path(argv))
        else:
            if argv[4] not in folded.paths:
                folded.paths.append(argv[4])
            if kind == "file":
                # A sensitive file ("0": no diff) is hashed on the target: its content stays there.
                whole = argv[6] != "0" and int(argv[7]) <= READ_LIMIT
                into = folded.whole if whole else folded.hashed
                if argv[4] not in into:
                    into.append(argv[4])
    for i in folded.partial:
        folded.argvs.append(["sh", "-c", _READS[argvs[i][2]].without, *argvs[i][3:]])
    if folded.paths:
        folded.argvs.append(["sh", "-c", _STAT, "sh", *folded.paths])
    if folded.hashed:
        folded.argvs.append(["sh", "-c", _HASH, "sh", *folded.hashed])
    if folded.reads or folded.whole:
        folded.argvs.append(["sh", "-c", _READ, "sh", *folded.reads, "--", *folded.whole])
    if folded.units:
        folded.argvs.append(reuse.units(folded.units))
    # own[] holds original indexes; the runner reads results in argvs order.
    folded.own = sorted(folded.own)
    return folded


def _stats(output: str) -> dict[str, tuple[str, str, str]]:
    fields = output.split("\0")
    out: dict[str, tuple[str, str, str]] = {}
    for k in range(0, len(fields) - 3, 4):
        name, kind, meta, shown = fields[k:k + 4]
        target = shown[len(name) + 4:] if shown.startswith(name + " -> ") else ""
        out[name] = (kind, meta, target)
    return out


def _read_path(argv: Sequence[str]) -> str:
    read = _READS[argv[2]]
    return f"{argv[4 + read.arg]}/{read.name}"


def _contents(output: str) -> dict[str, str]:
    """grep -aHZ's "path NUL line" lines -> each file's text (a last line gets its newline)."""
    out: dict[str, str] = {}
    for line in output.split("\n"):
        path, sep, text = line.partition("\0")
        if sep:
            out[path] = out.get(path, "") + text + "\n"
    return out


def _put_back(partial: Probe, read: FileRead, content: str) -> Probe | None:
    """The step's own output: the file's lines where its `cat` would have printed them."""
    head, sep, tail = partial.output.partition(read.after)
    if not sep:
        return None  # cut short before the file's place: its own probe says what happened
    return Probe(partial.exit_code, head + sep + content + tail)


def _hashes(output: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for record in output.split("\0"):
        digest, sep, name = record.partition(" ")
        if sep and len(digest) == 64 and name[:1] in (" ", "*"):
            out[name[1:]] = digest
    return out


def _blocks(shown: Probe, count: int) -> list[str] | None:
    if not shown.ok:
        return None
    blocks = [b for b in shown.output.split("\n\n") if b.strip()]
    if len(blocks) != count or any("LoadState=" not in b for b in blocks):
        return None
    return [b.strip("\n") + "\n" for b in blocks]


def _file_like(kind: str, argv: Sequence[str], stats: dict, hashes: dict[str, str],
               contents: dict[str, str]) -> Probe | None:
    path = argv[4]
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
    if kind == "link" or ftype != "regular file":
        return Probe(0, f"other {ftype}\n")
    if path not in hashes:
        return _read_whole(argv, meta, contents.get(path))
    digest = hashes[path]
    if digest != argv[5] and argv[6] != "0":
        return None  # changed: its own probe sends the old content for the diff
    return Probe(0, f"file {meta}\n{digest}\n")


def _read_whole(argv: Sequence[str], meta: str, text: str | None) -> Probe | None:
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
    if digest == argv[5]:
        return Probe(0, f"file {meta}\n{digest}\n")
    # What `head -c LIMIT` would have printed, decoded as the transport decodes it.
    old = data[:int(argv[6])].decode("utf-8", "replace")
    return Probe(0, f"file {meta}\n{digest}\n{old}")
