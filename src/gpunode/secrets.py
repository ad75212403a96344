"""Secrets are registered once and redacted from every output path.

The inventory registers the values of variables whose names say they are
secret (…token, …secret, …password, api_key) and the value after `--api-key`
in any extra_args; the PVE client registers its API token. Output sinks and
error messages pass text through `redact`, structures (events, plans) through
`redact_data` before they are serialised, so that an escaped form of a secret
(JSON's `\\"`, an env file's `\\$`, systemd's `%%`, shell quoting, repr) is
masked as well as the raw value.

extra_args is not a secret and ends in argv (`ps`) and 0644 unit files, so an
API key there is refused (`refuse_in_args`), pointing to server_api_key, whose
home is steps/secretfiles.py (0600 files the units read).
"""

from __future__ import annotations

import json
import re
import shlex
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpunode.errors import InventoryError

_SECRET_NAME = re.compile(r"(token|secret|password|passwd|api_key|apikey)$", re.I)
_lock = threading.Lock()
_values: set[str] = set()
MASK = "********"
MIN_LENGTH = 6

#: Flags of the engines and routers that take a secret as their value.
SECRET_FLAGS = ("--api-key", "--admin-api-key")
SECRET_HOME = ("keep secrets off command lines: set the servers' API key as the variable server_api_key "
               "(inventory or --set); gpunode writes it into 0600 files the units read (docs/inventory.md "
               "'Secrets')")


def is_secret_name(name: object) -> bool:
    return bool(_SECRET_NAME.search(str(name)))


def _forms(text: str) -> set[str]:
    """The value as each output path may write it."""
    systemd = text.replace("%", "%%").replace("$", "$$")
    return {
        text,
        json.dumps(text, ensure_ascii=False)[1:-1],
        json.dumps(text)[1:-1],
        repr(text)[1:-1],
        shlex.quote(text),
        re.sub(r'(["\\`$])', r"\\\1", text),  # EnvironmentFile= double-quoted value
        systemd,
        systemd.replace("\\", "\\\\").replace('"', '\\"'),
    }


def register(value: Any) -> None:
    """Remember a secret value (short values are ignored: they would mask ordinary words)."""
    text = str(value) if value is not None else ""
    if len(text) >= MIN_LENGTH:
        with _lock:
            _values.update(f for f in _forms(text) if len(f) >= MIN_LENGTH)


def _flag_values(args: Sequence[Any]) -> list[str]:
    out = []
    words = [str(a) for a in args]
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if flag in SECRET_FLAGS:
            out.append(value if eq else (words[i + 1] if i + 1 < len(words) else ""))
    return out


def _extra_words(extra: Any) -> list[str]:
    if isinstance(extra, str):
        return extra.split()  # no shlex: an unclosed quote must not stop the registration
    if isinstance(extra, Sequence):
        return [str(a) for a in extra]
    return []


def register_vars(variables: Mapping[str, Any], inside_secret: bool = False) -> None:
    """Register the values of secret-named variables, at any depth: under a secret name every text
    inside a mapping or list is a secret too (issue 41: `x_token: {value: ...}` was registered as none)."""
    for key, value in variables.items():
        secret = inside_secret or is_secret_name(key)
        if isinstance(value, Mapping):
            register_vars(value, secret)
        elif secret and isinstance(value, list | tuple):
            register_vars({str(i): v for i, v in enumerate(value)}, True)
        elif secret:
            register(value)
        elif key == "extra_args":
            for found in _flag_values(_extra_words(value)):
                register(found.strip("'\""))


def holds_secret(value: Any) -> bool:
    """Whether a value (a string, or any string inside a list or mapping) contains a registered secret."""
    if isinstance(value, str):
        with _lock:
            return any(secret in value for secret in _values)
    if isinstance(value, Mapping):
        return any(holds_secret(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(holds_secret(v) for v in value)
    return False


def redact(text: str) -> str:
    with _lock:
        values = sorted(_values, key=len, reverse=True)
    for value in values:
        text = text.replace(value, MASK)
    return text


# Engines print their arguments at start-up (SGLang: "server_args=ServerArgs(..., api_key='k', ...)";
# vLLM: "non-default args: {'api_key': ['k'], ...}"), and a journal outlives the inventory that
# registered the key: lines read back from a target are masked by shape as well as by value.
_ASSIGNED = re.compile(r"""(\b[\w-]*(?:api[_-]?key|token|secret|password|passwd)['"]?\s*[=:]\s*\[?\s*)(['"]?)"""
                       r"""([^\s'",)\]}]+)(\2)""", re.I)
_FLAG = re.compile(r"(--(?:admin-)?api-key(?:=|\s+))(['\"]?)([^\s'\"]+)(\2)")
_NOT_A_VALUE = {"none", "null", "false", "true", "0", ""}


def _mask_match(m: re.Match[str]) -> str:
    value = m.group(3)
    # counters ("#token: 2345" in SGLang's decode lines) and words shorter than a key are not secrets
    if value.lower() in _NOT_A_VALUE or value == MASK or len(value) < MIN_LENGTH or value.replace(".", "").isdigit():
        return m.group(0)
    return f"{m.group(1)}{m.group(2)}{MASK}{m.group(4)}"


def redact_log(text: str) -> str:
    """Lines a target wrote (journalctl): registered secrets, and any value given to a
    secret-looking name or to --api-key."""
    return _FLAG.sub(_mask_match, _ASSIGNED.sub(_mask_match, redact(text)))


def redact_data(data: Any, text: Callable[[str], str] = redact) -> Any:
    """A copy of a JSON-like structure with `text` (the registry's redact) applied to every
    string, and every value under a secret-looking key (HF_TOKEN, api_key) masked whole;
    done before json.dumps, where escaping would hide a secret from a text search."""
    if isinstance(data, str):
        return text(data)
    if isinstance(data, Mapping):
        return {k: (MASK if is_secret_name(k) and isinstance(v, str) and v else redact_data(v, text))
                for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [redact_data(x, text) for x in data]
    return data


def refuse_in_args(name: str, args: Sequence[Any]) -> None:
    """A command-line list (extra_args) may not carry a secret: argv is world-readable in `ps`
    and lands in 0644 unit files. Refuse, naming the flag or the variable, never the value."""
    words = [str(a) for a in args]
    flags = sorted({w.partition("=")[0] for w in words if w.partition("=")[0] in SECRET_FLAGS})
    if flags:
        raise InventoryError(f"variable {name} holds {', '.join(flags)}: a secret on a command line is "
                             "readable by every user of the node (ps, unit files)", hint=SECRET_HOME)
    with _lock:
        values = list(_values)
    for i, word in enumerate(words):
        if any(v in word for v in values):
            raise InventoryError(f"variable {name}: argument {i + 1} holds the value of a secret variable; "
                                 "a command line is readable by every user of the node (ps, unit files)",
                                 hint="reference secrets through the secrets env file, not argv: " + SECRET_HOME)
