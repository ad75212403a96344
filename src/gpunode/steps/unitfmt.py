"""Quoting for systemd unit files and environment files.

systemd parses ExecStart= itself (not through a shell): words may be
double-quoted with C-style backslash escapes, `%` starts a specifier and `$`
an environment expansion, so both are doubled to stay literal.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

_PLAIN = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")


def exec_word(arg: str) -> str:
    escaped = arg.replace("%", "%%").replace("$", "$$")
    if _PLAIN.match(arg):
        return escaped
    escaped = escaped.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def exec_line(argv: Sequence[str]) -> str:
    return " ".join(exec_word(a) for a in argv)


def env_line(key: str, value: object) -> str:
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
        raise ValueError(f"not an environment variable name: {key!r}")
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'{key}="{text}"'


def env_lines(env: Mapping[str, object]) -> list[str]:
    return [env_line(k, v) for k, v in sorted(env.items())]
