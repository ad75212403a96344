"""The type names of the variables, and the check of a value against one.

A variable's type is written once, where it is declared: a role's roles/<role>/types.yml, or
resolve/, facts/ and pve/types.yml for the resolver, the facts probe and onboard. The registry
(gpunode/variables.py) reads those declarations and checks every value with checker(type); a
value of the wrong type raises Bad, whose text says how, and the registry names the variable and
where it was set. Values that reach a unit or env file are typed strictly (a path is absolute and
has no control characters), so what gets past here is data; steps/unitfmt.py escapes it for
systemd's syntax.

Types (the right-hand side in types.yml):
    bool, text (one line), name (text not starting with -), word (no spaces, not starting with -),
    path (absolute, no . or .. part, no backslash), "program path" (a path without $ quotes ; %),
    "path?" (a path or ""),
    paths, words, port, seconds ("infinity" or whole seconds), gpus (GPU indexes),
    args (a command line: list or string), unit (a systemd unit name), batch (a number of
    targets or a percentage), fraction (between 0 and 1), python (a Python version "3.12"),
    version ("0.5.10"), cores (CPU ids), switch (auto, true or false), mapping (of settings),
    "mapping a|b|c" (of settings with those keys only),
    "int A..B" (either end may be left out), "choice a|b|" (the empty string allowed
    when written last).
"""

from __future__ import annotations

import difflib
import posixpath
import re
import shlex
from collections.abc import Callable
from typing import Any

from gpunode.errors import preview

_UNIT = re.compile(r"^[A-Za-z0-9:_.@\\-]+\.(service|socket|timer|target|path|mount)$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Bad(Exception):
    """A value does not fit its type; the text says how."""


def control_chars(text: str) -> list[str]:
    """The control characters in text, as Python writes them ('\\n', '\\x00')."""
    return sorted({repr(c)[1:-1] for c in _CONTROL.findall(text)})


def _int(value: Any, low: int | None = None, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Bad("is not a whole number" + (" (YAML reads yes/no/on/off as true/false)"
                                             if isinstance(value, bool) else ""))
    if low is not None and value < low or high is not None and value > high:
        raise Bad(f"is out of range {low if low is not None else ''}..{high if high is not None else ''}")
    return value


#: Linux's PATH_MAX; no value of a setting is longer (issue 41: 100 KB paths and names were taken)
MAX_TEXT = 4096


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise Bad(f"is a {type(value).__name__}, not text")
    if len(value) > MAX_TEXT:
        raise Bad(f"is {len(value)} characters long, more than {MAX_TEXT}")
    if _CONTROL.search(value):
        raise Bad(f"holds control characters {', '.join(control_chars(value))}")
    return value


def _word(value: Any) -> str:
    text = _text(value)
    if not text or re.search(r"\s", text):
        raise Bad("must be one word, without spaces")
    return _not_an_option(text)


def _not_an_option(text: str) -> str:
    # These values follow a flag on a command line (--host X, --policy X, uv pip install X): one
    # that starts with - would be read as a flag of its own.
    if text.startswith("-"):
        raise Bad("starts with -, so the command it is passed to would read it as an option")
    return text


def _name(value: Any) -> str:
    return _not_an_option(_text(value))


def _path(value: Any) -> str:
    text = _text(value)
    if not text.startswith("/"):
        raise Bad("is not an absolute path (it must start with /)")
    if "\\" in text:
        raise Bad("holds a backslash, which systemd reads as an escape in a path")
    # A `.` or `..` part names another folder than the one it seems to: model_source=/m/tiny/.. staged
    # into /dev/shm/.. and its probe walked all of /dev (issue 29).
    parts = text.split("/")
    if "." in parts or ".." in parts:
        plain = posixpath.normpath(text)
        raise Bad(f"has a '.' or '..' part; write the folder it means without one ({plain})")
    if not text.strip("/"):
        raise Bad("is the root folder /; name the folder itself")
    return text


def _program_path(value: Any) -> str:
    """A folder whose programs start units (venv_root: ExecStart's argv[0] is <venv_root>/<pinset>/bin/python).
    systemd takes the executable word of ExecStart unquoted and expands $ in it: a path holding
    these would be another command, or a unit systemd refuses to load."""
    text = _path(value)
    quoting = sorted(set(text) & set("$\"'`;%"))
    if quoting:
        raise Bad(f"holds {' '.join(quoting)}, which systemd reads as its own syntax in a unit's program path; "
                  "pick a folder without it")
    return text


def _optional_path(value: Any) -> str:
    return "" if value in ("", None) else _path(value)


def _list(item: Callable[[Any], Any]) -> Callable[[Any], list]:
    def check(value: Any) -> list:
        if not isinstance(value, list):
            raise Bad(f"is a {type(value).__name__}, not a list")
        for i, x in enumerate(value):
            try:
                item(x)
            except Bad as exc:
                raise Bad(f"item {i} ({preview(x)}) {exc}") from None
        return value
    return check


#: a week: a longer wait is no limit (issue 41: 10**30 was taken, past what systemd's usec can hold)
MAX_SECONDS = 7 * 24 * 3600


def _seconds(value: Any) -> Any:
    if value == "infinity":
        return value
    try:
        return _int(value, 1, MAX_SECONDS)
    except Bad:
        raise Bad(f"is neither a whole number of seconds (1..{MAX_SECONDS}, a week) nor \"infinity\"") from None


def _each_int(items: list, high: int, note: str = "") -> None:
    """Each item a whole number 0..high (GPU indexes, CPU ids); the refusal names the item."""
    for x in items:
        try:
            _int(x, 0, high)
        except Bad as exc:
            raise Bad(f"holds {preview(x)}, which {exc}{note}") from None


def _gpus(value: Any) -> list[int]:
    items: list[Any]
    if isinstance(value, str):
        items = [x.strip() for x in value.split(",")]
        if not all(x.isdigit() for x in items):
            raise Bad("must be GPU indexes separated by commas, e.g. 0,1 (each a whole number)")
        items = [int(x) for x in items]
    elif isinstance(value, int) and not isinstance(value, bool):
        items = [value]
    elif isinstance(value, list):
        items = value
    else:
        raise Bad("must be a list of GPU indexes, e.g. [0, 1]")
    if not items:
        raise Bad("lists no GPU")
    _each_int(items, 1023, " (GPU indexes are 0, 1, ...)")
    if len(set(items)) != len(items):
        raise Bad("names a GPU twice")
    return items


def _args(value: Any) -> Any:
    if isinstance(value, str):
        try:
            words = shlex.split(value)
        except ValueError as exc:
            raise Bad(f"cannot be split into words: {exc}") from None
    elif isinstance(value, list):
        words = value
    else:
        raise Bad("must be a list of arguments or one string")
    for w in words:
        if not isinstance(w, (str, int, float)) or isinstance(w, bool):
            raise Bad(f"holds {preview(w)}, which is not an argument (write it as text)")
        if "\x00" in str(w):
            raise Bad("holds a NUL character, which no command line can carry")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Bad("is not true or false")
    return value


def _unit(value: Any) -> str:
    if not _UNIT.match(_text(value)):
        raise Bad("is not a systemd unit name, e.g. gpunode-demo.service")
    return value


def _batch(value: Any) -> Any:
    # Ansible's serial: a number of targets or a percentage of them (gpunode/rollout.py)
    if isinstance(value, bool) or not (isinstance(value, int) and value >= 1
                                       or isinstance(value, str) and re.fullmatch(r"[0-9]{1,3}%", value)):
        raise Bad("is neither a number of targets (1, 2, ...) nor a percentage (25%)")
    return value


def _fraction(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < float(value) < 1:
        raise Bad("is not a number between 0 and 1 (exclusive), e.g. 0.85")
    return float(value)


def _python(value: Any) -> str:
    if isinstance(value, float):  # YAML reads `python: 3.10` as the number 3.1: refuse rather than guess
        raise Bad("is a number; YAML turned the version into one: quote it, python: \"3.10\"")
    if not isinstance(value, str) or not re.fullmatch(r"3\.\d{1,2}", value):
        raise Bad("is not a Python version: give major.minor, e.g. 3.12 (quoted in YAML: python: \"3.12\")")
    return value


def _version(value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise Bad("is a number; YAML turned the version into one: quote it, e.g. \"0.5.10\"")
    return _word(value)


def _cores(value: Any) -> Any:
    """CPU ids: a list, one number or "0,2,4" (from --set)."""
    items = [value] if isinstance(value, int) and not isinstance(value, bool) else value
    if isinstance(items, str):
        parts = [p.strip() for p in items.split(",")]
        if not all(p.isascii() and p.isdigit() and len(p) <= 9 for p in parts):
            raise Bad("must be whole numbers separated by commas, e.g. 0,1")
        items = [int(p) for p in parts]
    if not isinstance(items, list) or not items:
        raise Bad("must be a list of CPU ids, e.g. [0, 1]")
    _each_int(items, 1048575)
    return value


def _switch(value: Any) -> Any:
    if value in (True, False) or value in ("auto", "true", "false"):
        return value
    raise Bad("is not one of 'auto', 'true', 'false'")


def _mapping(value: Any) -> Any:
    if not isinstance(value, dict):
        raise Bad(f"is a {type(value).__name__}, not a mapping of settings")
    return value


# The resolver's and onboard's types, with what each means
MORE: dict[str, tuple[Callable[[Any], Any], str]] = {
    "fraction": (_fraction, "a number between 0 and 1"),
    "python": (_python, "a Python version such as \"3.12\""),
    "version": (_version, "a version such as \"0.5.10\""),
    "cores": (_cores, "CPU ids, e.g. [0, 1]"),
    "switch": (_switch, "auto, true or false"),
    "mapping": (_mapping, "a mapping of settings"),
}


SIMPLE: dict[str, Callable[[Any], Any]] = {
    "bool": _bool, "text": _text, "word": _word, "path": _path, "path?": _optional_path, "paths": _list(_path),
    "words": _list(_word), "port": lambda v: _int(v, 1, 65535), "seconds": _seconds, "gpus": _gpus,
    "args": _args, "unit": _unit, "name": _name, "program path": _program_path, "batch": _batch,
}


def _keyed_mapping(keys: list[str]) -> Callable[[Any], Any]:
    """A mapping whose keys are declared (`mapping a|b|c`): a key no reader takes is refused by name
    (issue 41: `pve_api: {token_secrte: ...}` was dropped without a word). Its values are not
    quoted: a misspelled secret is still a secret."""
    def check(value: Any) -> Any:
        _mapping(value)
        for key in value:
            if key not in keys:
                close = difflib.get_close_matches(str(key), keys, n=1, cutoff=0.5)
                raise Bad(f"has the key {str(key)[:60]!r}, which nothing reads" +
                          (f" (did you mean {close[0]}?)" if close else ""))
        return value
    return check


def checker(spec: str) -> Callable[[Any], Any]:
    """The check for one type written in a types.yml; ValueError for a type name that is none."""
    if spec in MORE:
        return MORE[spec][0]
    if spec in SIMPLE:
        return SIMPLE[spec]
    kind, _, arg = spec.partition(" ")
    if kind == "mapping" and arg:
        return _keyed_mapping(arg.split("|"))
    if kind == "int":
        low, _, high = arg.partition("..")
        return lambda v: _int(v, int(low) if low else None, int(high) if high else None)
    if kind == "choice":
        allowed = arg.split("|")

        def choice(v: Any) -> Any:
            if v is None or isinstance(v, bool) or str(v) not in allowed:
                raise Bad(f"is not one of {', '.join(repr(a) for a in allowed)}")
            return v
        return choice
    raise ValueError(f"unknown variable type {spec!r}")


def describe(spec: str) -> str:
    """What a value of the type is, for a refusal's "expected ..." and docs/variables.md."""
    if spec in MORE:
        return MORE[spec][1]
    kind, _, arg = spec.partition(" ")
    if kind == "mapping":
        return f"a mapping of {', '.join(arg.split('|'))}"
    if kind == "int":
        return f"a whole number {arg}"
    if kind == "choice":
        return "one of " + ", ".join(repr(a) for a in arg.split("|"))
    return {"path": "an absolute path without control characters", "path?": "an absolute path or \"\"",
            "paths": "a list of absolute paths", "port": "a port number 1..65535", "bool": "true or false",
            "text": "one line of text", "word": "one word", "words": "a list of words",
            "seconds": "whole seconds or \"infinity\"", "gpus": "GPU indexes, e.g. [0, 1]",
            "args": "a list of arguments or one string", "unit": "a systemd unit name",
            "name": "one line of text not starting with -",
            "program path": "an absolute path without $ \" ' ` ; or %",
            "batch": "a number of targets or a percentage, e.g. 1 or 25%"}.get(spec, spec)
