"""A folder copied from the workstation: the target's folder holds exactly that tree.

The probe hashes the target's folder in one command (every entry's type, path,
mode and link target, then every regular file's content); the workstation
computes the same digest of its own folder. Equal digests: nothing to send. Else
the whole tree goes over as one tar stream into a fresh folder that then replaces
the old one, so files the workstation no longer has do not linger and a cut
transfer never leaves a half-updated folder in place.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from gpunode import shell
from gpunode.errors import StepError
from gpunode.steps.base import Change, NoChange, Outcome, Probe, Step
from gpunode.transport.base import Transport

# Listing lines are "type<TAB>path<TAB>mode<TAB>link target", sorted bytewise; then sha256sum's
# lines for the regular files. tree_digest() below builds the very same text locally.
_DIGEST = shell.script("gpunode.steps", "tree_digest.sh")

_SWAP = shell.script("gpunode.steps", "tree_swap.sh")

_KIND = {stat.S_IFDIR: "d", stat.S_IFREG: "f", stat.S_IFLNK: "l"}


def tree_digest(root: Path) -> tuple[str, int]:
    """(digest as the probe computes it, number of regular files) of a local folder."""
    listing: list[bytes] = []
    files: list[tuple[bytes, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = os.fsencode(path.relative_to(root))
            if b"\n" in rel or b"\\" in rel or b"\t" in rel:
                raise StepError(f"cannot copy {path}: its name holds a tab, newline or backslash",
                                hint="rename it; the folder's digest is line-based")
            st = path.lstat()
            kind = _KIND.get(stat.S_IFMT(st.st_mode))
            if kind is None:
                raise StepError(f"cannot copy {path}: not a file, folder or symlink",
                                hint="leave sockets, fifos and devices out of the folder")
            link = os.fsencode(os.readlink(path)) if kind == "l" else b""
            listing.append(b"\t".join([kind.encode(), rel, format(stat.S_IMODE(st.st_mode), "o").encode(), link]))
            if kind == "f":
                files.append((b"./" + rel, path))
    text = b"".join(line + b"\n" for line in sorted(listing))
    for arcname, file in sorted(files):
        text += hashlib.sha256(file.read_bytes()).hexdigest().encode() + b"  " + arcname + b"\n"
    return hashlib.sha256(text).hexdigest(), len(files)


@dataclass
class LocalTree(Step):
    """`dest` on the target holds exactly the tree of the local folder `source`, modes kept.

    + source: a folder on the workstation (where gpunode runs)
    + dest: the folder on the target it replaces wholesale when anything differs
    """

    source: str
    dest: str

    @property
    def id(self) -> str:
        return f"tree:{self.dest}"

    def probe(self) -> list[str]:
        return ["sh", "-c", _DIGEST, "sh", self.dest]

    def _local(self) -> tuple[str, int]:
        root = Path(self.source)
        if not root.is_dir():
            raise StepError(f"the local folder {root} does not exist", hint="check the path on this machine")
        return tree_digest(root)

    def check(self, probe: Probe) -> Outcome:
        if not probe.ok:
            raise StepError(f"cannot read {self.dest} on the target (exit code {probe.exit_code})",
                            evidence=probe.output[-500:])
        digest, count = self._local()
        current = probe.output.strip()
        if current == digest:
            return NoChange(f"{self.dest} already holds the {count} files of {self.source} "
                            f"with their modes (digest {digest[:8]})")
        what = "copy" if current == "missing" else "replace"
        return Change(f"{what} {self.dest} with the {count} files of {self.source}, modes kept")

    def apply(self, target: Transport) -> None:
        self._local()
        new = f"{self.dest}.gpunode-new"
        target.run(["rm", "-rf", "--", new], check=True, what=f"clearing {new}")
        target.put_tree(Path(self.source), new)
        target.script(_SWAP, self.dest, check=True, what=f"moving the new tree into {self.dest}")
