"""Files on the target: Directory, File (literal content), Template (Jinja2), Symlink.

A File's own probe sends back a stat line and the sha256 of the current content;
the old content (for the diff) crosses the wire only when the hashes differ,
and only up to DIFF_LIMIT bytes. In a batch, a small file that is not sensitive is read
whole instead, in the one grep that reads every manifest (steps/reads.py). Writes go through Transport.write_file:
temp file, hash verified on the target, fsync, rename.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from gpunode import searchpath, shell
from gpunode.errors import StepError, tail
from gpunode.steps import reads
from gpunode.steps.base import Batched, Change, Command, NoChange, Outcome, Probe, Step
from gpunode.transport.base import SHA_ON_STDIN, Transport, write_argv

DIFF_LIMIT = 256 * 1024

# $4, the desired size, is not read by the script (it was how the batch once knew the file's size).
_FILE_PROBE = shell.script("gpunode.steps", "file_probe.sh")
_DIR_PROBE = shell.script("gpunode.steps", "dir_probe.sh")
_LINK_PROBE = shell.script("gpunode.steps", "link_probe.sh")
# ln into a temp name, then rename over the path: the link is never absent.
_LINK_APPLY = shell.script("gpunode.steps", "link_apply.sh")

_DIR_APPLY = 'set -e; mkdir -p -- "$1"; chmod "$2" "$1"; [ -z "$3" ] || chown "$3" "$1"'


def short(sha: str) -> str:
    return sha[:8]


def _owner_differs(wanted: str | None, user: str, group: str) -> bool:
    if not wanted:
        return False
    want_user, _, want_group = wanted.partition(":")
    return want_user != user or bool(want_group and want_group != group)


def _probe_failed(path: str, probe: Probe) -> StepError:
    return StepError(f"cannot inspect {path} (exit code {probe.exit_code})", evidence=tail(probe.output),
                     hint="check that the path is readable by the connecting user")


def _lines(text: str) -> list[str]:
    """Lines as the file has them: str.splitlines would also split at U+2028, \x0c, \x1c-\x1e
    and a lone \r, which a value may hold, so the diff would show lines the file does not have."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    return out + [parts[-1]] if parts[-1] else out


def text_diff(old: str, new: str, path: str) -> str:
    """A unified diff that also marks a missing newline at the end, like diff(1)."""
    lines = difflib.unified_diff(_lines(old), _lines(new),
                                 fromfile=f"{path} (target)", tofile=f"{path} (desired)")
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


@dataclass
class Directory(Step):
    """A directory with a mode and optionally an owner ("user" or "user:group")."""

    path: str
    mode: int = 0o755
    owner: str | None = None

    @property
    def id(self) -> str:
        return f"dir:{self.path}"

    def probe(self) -> list[str]:
        return ["sh", "-c", _DIR_PROBE, "sh", self.path]

    def batched(self) -> Batched:
        return reads.file_like("dir", self.probe(), self.path, "", 0, False)

    def check(self, probe: Probe) -> Outcome:
        if not probe.ok:
            raise _probe_failed(self.path, probe)
        kind, _, rest = probe.output.strip().partition(" ")
        if kind == "missing":
            return Change(f"create directory {self.path} (mode {self.mode:04o})")
        if kind == "other":
            raise StepError(f"{self.path} exists but is a {rest}, not a directory",
                            hint="move it away by hand; gpunode does not delete what it did not make")
        mode, user, group = rest.split()
        todo = []
        if int(mode, 8) != self.mode:
            todo.append(f"mode {int(mode, 8):04o} → {self.mode:04o}")
        if _owner_differs(self.owner, user, group):
            todo.append(f"owner {user}:{group} → {self.owner}")
        if todo:
            return Change(f"change {self.path}: " + ", ".join(todo))
        owned = f" and owner {user}:{group}" if self.owner else ""
        return NoChange(f"{self.path} is already a directory with mode {self.mode:04o}{owned}")

    def commands(self) -> list[Command]:
        return [Command(tuple(shell.sh(_DIR_APPLY, self.path, format(self.mode, "o"), self.owner or "")),
                        f"creating directory {self.path}")]


@dataclass
class File(Step):
    """A regular file with exactly this content, mode and (optionally) owner.

    sensitive: keep the content out of diffs (tokens, keys).
    """

    changes_facts: ClassVar[bool] = False

    path: str
    content: str | bytes = ""
    mode: int = 0o644
    owner: str | None = None
    sensitive: bool = False

    @property
    def id(self) -> str:
        return f"file:{self.path}"

    @property
    def data(self) -> bytes:
        return self.content.encode() if isinstance(self.content, str) else self.content

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def probe(self) -> list[str]:
        # A sensitive file's old content (an old key) never crosses the wire: it is not shown. Nor
        # does its hash go into argv (a short key can be found from it): "-" matches no hash, and
        # the comparison is made here, on the hash the probe prints.
        if self.sensitive:
            return ["sh", "-c", _FILE_PROBE, "sh", self.path, SHA_ON_STDIN, "0", "0"]
        return ["sh", "-c", _FILE_PROBE, "sh", self.path, self.sha256, str(DIFF_LIMIT), str(len(self.data))]

    def batched(self) -> Batched:
        # From its probe's own words (the content is hashed once): the desired sha256, how much of the
        # old content the diff may show (0: a secret, hashed on the target, its content stays there)
        # and the size.
        argv = self.probe()
        sha, limit, size = argv[5], int(argv[6]), int(argv[7])
        return reads.file_like("file", argv, self.path, sha, limit, limit != 0 and size <= reads.READ_LIMIT)

    def check(self, probe: Probe) -> Outcome:
        if not probe.ok:
            raise _probe_failed(self.path, probe)
        first, _, rest = probe.output.partition("\n")
        kind, _, detail = first.partition(" ")
        # a secret's size and hash prefix would go into the journal, which any user can read
        desc = f"mode {self.mode:04o}" if self.sensitive else f"sha256 {short(self.sha256)}, mode {self.mode:04o}"
        if kind == "missing":
            size = "secret" if self.sensitive else f"{len(self.data)} bytes"
            return Change(f"create {self.path} ({size}, {desc})", self._diff("", None))
        if kind == "link":
            return Change(f"replace the symlink {self.path} → {detail} with a file ({desc})")
        if kind == "other":
            raise StepError(f"{self.path} exists but is a {detail}, not a regular file",
                            hint="move it away by hand; gpunode does not delete what it did not make")
        mode, user, group, size = detail.split()
        sha, _, old = rest.partition("\n")
        todo = []
        diff = ""
        if sha != self.sha256:
            todo.append("secret content" if self.sensitive else f"content sha256 {short(sha)} → {short(self.sha256)}")
            diff = self._diff(old, int(size))
        if int(mode, 8) != self.mode:
            todo.append(f"mode {int(mode, 8):04o} → {self.mode:04o}")
        if _owner_differs(self.owner, user, group):
            todo.append(f"owner {user}:{group} → {self.owner}")
        if todo:
            return Change(f"update {self.path}: " + ", ".join(todo), diff)
        owned = f", owner {user}:{group}" if self.owner else ""
        said = "" if self.sensitive else f" (sha256 {short(sha)})"
        return NoChange(f"{self.path} already has the desired content{said}, mode {self.mode:04o}{owned}")

    def _diff(self, old: str, old_size: int | None) -> str:
        if self.sensitive:
            return f"(secret changed: the diff of {self.path} is hidden, the content is sensitive)\n"
        if old_size is not None and old_size > DIFF_LIMIT:
            return f"(diff of {self.path} omitted: the current file has {old_size} bytes)\n"
        try:
            new = self.data.decode("utf-8")
        except UnicodeDecodeError:
            return f"(diff of {self.path} omitted: binary content)\n"
        if "\0" in new or "\0" in old:
            return f"(diff of {self.path} omitted: binary content)\n"
        return text_diff(old, new, self.path)

    def _sent(self) -> tuple[bytes, str]:
        """What goes to the write's stdin, and its sha256 argument: a secret's hash travels on
        stdin, ahead of the content (`ps` on the target shows argv)."""
        if self.sensitive:
            return f"{self.sha256}\n".encode() + self.data, SHA_ON_STDIN
        return self.data, self.sha256

    def commands(self) -> list[Command]:
        data, sha = self._sent()
        return [Command(tuple(write_argv(self.path, self.mode, self.owner, sha)), f"writing {self.path}", stdin=data)]

    def apply(self, target: Transport) -> None:
        # Through the transport's own primitive, whose default runs exactly commands(): a transport
        # may write files its own way (the lab's cut-mid-upload test hooks in there).
        data, sha = self._sent()
        target.write_file(self.path, data, mode=self.mode, owner=self.owner, sha256=sha)


@dataclass
class Template(File):
    """A File whose content is templates/<template> rendered with `vars` (StrictUndefined).

    comment: the comment marker of the file's format for the "managed by
    gpunode" header; None for formats without comments (JSON).
    The template is the first of that name on the search path (a user's templates/ folder
    before the shipped one); check() says which file it was.
    """

    template: str = ""
    vars: Mapping[str, Any] = field(default_factory=dict)
    comment: str | None = "#"

    def __post_init__(self) -> None:
        if not self.template:
            raise StepError(f"Template for {self.path} names no template")
        from gpunode.steps.render import render_from  # jinja2 (~90 ms): `status` reaches this module, renders nothing

        self.content, self.source = render_from(self.template, self.vars, comment=self.comment)

    @property
    def origin(self) -> str:
        if searchpath.is_shipped(Path(self.source)):
            return f"template {self.template}, shipped"
        return f"template {self.source}"

    def check(self, probe: Probe) -> Outcome:
        outcome = super().check(probe)
        if isinstance(outcome, Change):
            return replace(outcome, summary=f"{outcome.summary} ({self.origin})")
        return replace(outcome, reason=f"{outcome.reason} ({self.origin})")


@dataclass
class Symlink(Step):
    """path is a symlink to target. force: replace a regular file standing at path."""

    path: str
    target: str
    force: bool = False

    @property
    def id(self) -> str:
        return f"link:{self.path}"

    def probe(self) -> list[str]:
        return ["sh", "-c", _LINK_PROBE, "sh", self.path]

    def batched(self) -> Batched:
        return reads.file_like("link", self.probe(), self.path, "", 0, False)

    def check(self, probe: Probe) -> Outcome:
        if not probe.ok:
            raise _probe_failed(self.path, probe)
        first, _, rest = probe.output.partition("\n")
        kind, _, detail = first.partition(" ")
        if kind == "missing":
            return Change(f"create symlink {self.path} → {self.target}")
        if kind == "link":
            current = rest.rstrip("\n")
            if current == self.target:
                return NoChange(f"{self.path} already points to {self.target}")
            return Change(f"repoint {self.path}: {current} → {self.target}")
        if detail.startswith("regular") and self.force:
            return Change(f"replace the file {self.path} with a symlink to {self.target}")
        raise StepError(f"{self.path} exists but is a {detail}, not a symlink",
                        hint="move it away by hand" + (", or set force=True to replace a file"
                                                       if detail.startswith("regular") else ""))

    def commands(self) -> list[Command]:
        return [Command(tuple(shell.sh(_LINK_APPLY, self.path, self.target)), f"linking {self.path} → {self.target}")]
