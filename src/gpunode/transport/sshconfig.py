"""~/.ssh/config and /etc/ssh/ssh_config as OpenSSH reads them, Include lines followed.

paramiko's SSHConfig (which Fabric uses) keeps `Include` as one more setting and never opens the
file, so the Host blocks a user keeps in ~/.ssh/config.d/ (or Debian's /etc/ssh/ssh_config.d/*.conf)
were silently unread (issue 41). Here each Include is replaced by the text of the files it names,
as readconf.c does: each argument a path or a glob(7) pattern (its matches in sorted order), `~`
and ${VAR} expanded, a relative one taken under ~/.ssh for the user's file and /etc/ssh for the
system's, at most 16 levels deep (READCONF_MAX_DEPTH). The text after an Include stays in the block
it was written in: the enclosing Host or Match line is repeated after the included text.

Where gpunode is stricter than ssh, it says so instead of guessing: a path with no wildcard that
names no file (ssh skips it without a word: a Host block the user counts on would be missing), a
file that includes itself through any chain (ssh stops at depth 16 with "too many recursive
includes"), and an Include inside a Host or Match block (other than `Host *` / `Match all`) of a
file that has Host or Match blocks of its own (ssh checks those only when the enclosing block
matches; paramiko's blocks cannot nest). Every file goes through the user-file reader: a FIFO or
a device is refused, not waited on.
"""

from __future__ import annotations

import glob
import io
import os
import re
import shlex
from pathlib import Path

import paramiko

from gpunode import userfiles
from gpunode.errors import ConnectError

USER_FILE = "~/.ssh/config"
SYSTEM_FILE = "/etc/ssh/ssh_config"
MAX_DEPTH = 16  # OpenSSH's READCONF_MAX_DEPTH
MAX_BYTES = 1 << 20  # far above any ssh_config; a larger file is a wrong path

_LINE = re.compile(r"\s*([A-Za-z]+)(?:\s*=\s*|\s+)(.*?)\s*")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ALWAYS = re.compile(r"\s*(host\s*=?\s*\*|match\s*=?\s*all)\s*", re.I)


def load(user: str = USER_FILE, system: str = SYSTEM_FILE) -> paramiko.SSHConfig:
    """The user's then the system's file (ssh takes the first value it finds), Includes inlined."""
    config = paramiko.SSHConfig()
    for path, base in ((Path(user).expanduser(), Path("~/.ssh").expanduser()), (Path(system), Path("/etc/ssh"))):
        if os.path.lexists(path):
            config.parse(io.StringIO(expand(path, base)))
    return config


def expand(path: Path, base: Path, chain: tuple[Path, ...] = ()) -> str:
    """The text of one config file with its Include lines replaced by what they name."""
    real = Path(os.path.realpath(path))
    if real in chain:
        loop = " -> ".join(str(p) for p in (*chain, real))
        raise ConnectError(f"ssh config Include lines lead round in a loop: {loop}",
                           hint="remove the Include that names a file already being read")
    if len(chain) >= MAX_DEPTH:
        raise ConnectError(f"ssh config {path}: Include nested more than {MAX_DEPTH} levels deep (ssh refuses it too)",
                           hint="include the files from one place")
    text = userfiles.read_text(path, what="ssh config file", error=ConnectError, limit=MAX_BYTES)
    out: list[str] = []
    header = ""  # the Host or Match line whose block the current line is in
    for number, line in enumerate(text.splitlines(), 1):
        m = _LINE.fullmatch(line)
        keyword = m.group(1).lower() if m and not line.lstrip().startswith("#") else ""
        if keyword in ("host", "match"):
            header = line
        if keyword != "include":
            out.append(line)
            continue
        assert m is not None
        where = f"{path}:{number}"
        for name in _names(m.group(2), where, base):
            included = expand(name, base, (*chain, real))
            if header and not _ALWAYS.fullmatch(header) and _has_blocks(included):
                raise ConnectError(f"{where}: Include of {name} inside the block `{header.strip()}`, and {name} has "
                                   "Host or Match blocks of its own: ssh would read them only for hosts that "
                                   "block matches, which gpunode cannot follow",
                                   hint=f"move the Include above the first Host line of {path}")
            out.append(included)
            out.append(header or "Host *")  # what follows stays in the block it was written in
    return "\n".join(out) + "\n"


def _names(args: str, where: str, base: Path) -> list[Path]:
    """The files one Include line names, in ssh's order: its arguments in turn, each glob sorted."""
    try:
        words = shlex.split(args, comments=True)
    except ValueError:
        raise ConnectError(f"{where}: Include has an unclosed quote", hint="close the quote") from None
    if not words:
        raise ConnectError(f"{where}: Include names no file", hint="give a path, e.g. Include config.d/*")
    out: list[Path] = []
    for word in words:
        missing = next((v for v in _VAR.findall(word) if v not in os.environ), None)
        if missing:
            raise ConnectError(f"{where}: Include uses ${{{missing}}}, which is not set in the environment",
                               hint=f"set {missing} or write the path out")
        word = os.path.expanduser(_VAR.sub(lambda v: os.environ[v.group(1)], word))
        pattern = word if os.path.isabs(word) else str(base / word)
        if glob.has_magic(pattern):
            out += [Path(p) for p in sorted(glob.glob(pattern))]
        elif os.path.lexists(pattern):
            out.append(Path(pattern))
        else:
            raise ConnectError(f"{where}: Include names {pattern}, which does not exist (ssh would skip it "
                               "without a word, and the Host blocks in it would be missing)",
                               hint="fix the path, create the file, or remove the Include")
    return out


def _has_blocks(text: str) -> bool:
    return any((m := _LINE.fullmatch(line)) and m.group(1).lower() in ("host", "match")
               for line in text.splitlines() if not line.lstrip().startswith("#"))
