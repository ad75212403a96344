"""The only place where shell command strings are built.

Everything that crosses a shell (ssh's remote command line, `sh -c` inside a
container) goes through `join` (shlex.join), which quotes every argument with
POSIX single quotes. A property test sends arbitrary strings through ssh -> pct -> sh and
checks that they arrive unchanged.
"""

from __future__ import annotations

import functools
import re
import shlex
import sys
from collections.abc import Iterable, Sequence
from importlib import import_module
from pathlib import Path

# shlex.quote is exactly the quoting wanted: words of [A-Za-z0-9_@%+=:,./-] stay bare (re.ASCII,
# and a trailing newline is quoted), anything else goes in single quotes with ' written '"'"'.
quote = shlex.quote


def join(argv: Sequence[str]) -> str:
    """argv -> one shell command line whose words are exactly argv (shlex.join, refusing a bare string)."""
    if isinstance(argv, str):
        raise TypeError("join() takes a list of arguments, not a string")
    return shlex.join(str(a) for a in argv)


def package_dir(package: str) -> Path:
    """The folder of gpunode's own `package`, where its data files lie beside its modules. Not
    importlib.resources.files(): its reader imports zipfile (~9 ms of every command's start, issue 45)
    for packages that a wheel always installs as plain folders."""
    module = sys.modules.get(package) or import_module(package)
    return Path(next(iter(module.__path__)))


@functools.cache
def script(package: str, name: str) -> str:
    """The text of the shell script `name` that lies beside the modules of `package`, e.g.
    script("gpunode.fleet", "logs.sh"). Whole scripts live in .sh files, where shellcheck reads
    them (CI) and the wheel carries them; they still travel as `sh -c TEXT sh ARGS`, so nothing
    is installed on the target for them. The file's leading comments (the shellcheck directive, what
    the script takes) stay home: the text starts at its first command."""
    lines = package_dir(package).joinpath(name).read_text(encoding="utf-8").splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.strip() and not line.startswith("#")), len(lines))
    return "".join(lines[start:])


def sh(script: str, *args: str) -> list[str]:
    """argv that runs `script` with sh, with `args` as $1, $2, ... (never spliced into the text)."""
    return ["sh", "-c", script, "sh", *args]


def env_prefix(env: dict[str, str]) -> list[str]:
    """argv prefix that sets environment variables through env(1)."""
    if not env:
        return []
    for key in env:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise ValueError(f"not an environment variable name: {key!r}")
    return ["env", *(f"{k}={v}" for k, v in env.items())]


def lines(commands: Iterable[Sequence[str]]) -> str:
    """Several argv lists as one script, each on its own line."""
    return "\n".join(join(c) for c in commands) + "\n"
