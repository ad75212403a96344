"""Secrets are registered once and redacted from every output path.

The inventory registers the values of variables whose names say they are
secret (…token, …secret, …password, api_key); the PVE client registers its
API token. Output sinks and error messages pass text through `redact`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Any

_SECRET_NAME = re.compile(r"(token|secret|password|passwd|api_key|apikey)$", re.I)
_lock = threading.Lock()
_values: set[str] = set()
MASK = "********"


def register(value: Any) -> None:
    """Remember a secret value (short values are ignored: they would mask ordinary words)."""
    text = str(value) if value is not None else ""
    if len(text) >= 6:
        with _lock:
            _values.add(text)


def register_vars(variables: Mapping[str, Any]) -> None:
    for key, value in variables.items():
        if isinstance(value, Mapping):
            register_vars(value)
        elif _SECRET_NAME.search(str(key)):
            register(value)


def redact(text: str) -> str:
    with _lock:
        values = sorted(_values, key=len, reverse=True)
    for value in values:
        text = text.replace(value, MASK)
    return text
