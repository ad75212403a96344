"""Quoting for systemd unit files and environment files: the one place values are escaped.

The rules (systemd.syntax(7), systemd.service(5) "Command lines", systemd.exec(5)
EnvironmentFile=):

- A unit file is read line by line; a line that ends in a backslash continues on
  the next one, and `\\r` ends a line as `\\n` does. So no value may carry a control
  character or end in a backslash: that is how settings are injected.
- `%` starts a specifier in most settings (Description=, paths, command lines),
  so it is doubled everywhere.
- ExecStart= is split into words by systemd itself (not a shell): a word may be
  double-quoted with C escapes (`\\n`, `\\x01`), `$FOO`/`${FOO}` expand unless
  written `$$`, and a lone `;` separates commands unless written `\\;`. NUL cannot
  be passed in an argv at all.
- An EnvironmentFile= value in double quotes takes `\\"`, `\\\\`, `\\$` and `` \\` ``
  literally; a backslash before a newline would join lines, so control
  characters are refused there too.

Templates of units get only values made here (UnitSafe) or numbers; render.py
refuses anything else, so no raw user string reaches a unit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from gpunode.errors import StepError
from gpunode.vartypes import control_chars

_PLAIN = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_C_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\", '"': '\\"'}


class UnitSafe(str):
    """Text already escaped for the place it goes in a unit or env file."""


class ExecLine(UnitSafe):
    """A whole command line for an Exec setting: the rendered unit must keep it whole (steps/unitcheck.py)."""


class UnitValueError(StepError, ValueError):
    """A value that cannot be written into a unit or env file as data."""


def _refuse(what: str, value: str, why: str) -> UnitValueError:
    return UnitValueError(f"{what}={value!r} cannot go into a systemd unit: {why}",
                          hint=f"fix {what} in the inventory or --set (systemd.syntax(7) reads "
                          "control characters and a trailing backslash as unit syntax)")


def exec_word(arg: str, what: str = "argument") -> str:
    if "\x00" in arg:
        raise _refuse(what, arg, "NUL cannot be passed in a command line")
    escaped = arg.replace("%", "%%").replace("$", "$$")
    if arg == ";":
        return "\\;"  # a lone ; would separate two commands
    if _PLAIN.match(arg):
        return escaped
    out = "".join(_C_ESCAPES.get(c) or (f"\\x{ord(c):02x}" if _CONTROL.match(c) else c) for c in escaped)
    return f'"{out}"'


def exec_line(argv: Sequence[str], what: str = "argument") -> ExecLine:
    if not argv or not str(argv[0]).startswith("/"):
        raise _refuse(what, str(argv[0]) if argv else "", "a command line starts with an absolute path")
    return ExecLine(" ".join(exec_word(str(a), what) for a in argv))


def unit_text(value: object, what: str = "value") -> UnitSafe:
    """Free text for a setting such as Description=: one line, specifiers kept literal."""
    text = str(value)
    if _CONTROL.search(text):
        raise _refuse(what, text, f"it holds control characters {', '.join(control_chars(text))}")
    if text.endswith("\\"):
        raise _refuse(what, text, "a trailing backslash joins the next line to this setting")
    return UnitSafe(text.replace("%", "%%"))


def unit_path(value: object, what: str = "path", *, word: bool = False) -> UnitSafe:
    """An absolute path for a setting; word=True for settings that take a list of paths
    (RequiresMountsFor=), where a path with spaces or quotes is double-quoted."""
    text = str(value)
    if not text.startswith("/"):
        raise _refuse(what, text, "a path here must be absolute")
    if "\\" in text:
        raise _refuse(what, text, "systemd reads a backslash in a path as an escape")
    safe = unit_text(text, what)
    if word and re.search(r"[\s\"']", safe):
        return UnitSafe('"' + safe.replace('"', '\\"') + '"')
    return safe


def unit_seconds(value: object, what: str = "timeout") -> UnitSafe:
    """A time span setting: whole seconds or infinity (gpunode/vartypes.py typed it already)."""
    if value == "infinity" or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return UnitSafe(str(value))
    raise _refuse(what, str(value), "it must be whole seconds or \"infinity\"")


def unit_words(values: Sequence[str], what: str = "unit") -> UnitSafe:
    """Unit names (already checked by systemd.py's name rule) for After=/Wants=."""
    return UnitSafe(" ".join(unit_text(v, what) for v in values))


def env_value(key: str, value: object) -> str:
    if not _NAME.match(key):
        raise UnitValueError(f"not an environment variable name: {key!r}",
                             hint="names are letters, digits and _, not starting with a digit")
    text = str(value)
    if _CONTROL.search(text):
        raise _refuse(key, text, f"an environment file value cannot hold control characters "
                      f"{', '.join(control_chars(text))}")
    return re.sub(r'(["\\`$])', r"\\\1", text)


def env_line(key: str, value: object) -> str:
    return f'{key}="{env_value(key, value)}"'


def env_lines(env: Mapping[str, object]) -> list[str]:
    return [env_line(k, v) for k, v in sorted(env.items())]


def env_text(env: Mapping[str, object]) -> UnitSafe:
    return UnitSafe("".join(line + "\n" for line in env_lines(env)))
