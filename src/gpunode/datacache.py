"""Shipped YAML tables, parsed once and kept as JSON under the user's cache dir (issue 45).

libyaml parses, but PyYAML still resolves and builds every value in Python: ~13 ms for
compat/derived/sglang-registry.yml, ~8-13 ms for each pin set's part of sglang-choices.yml, paid by
every plan. json.loads gives the same values in ~0.2 ms. An entry is keyed by the table's text and
the code that parses it, so an edited table or a changed parser misses it; an absent, half-written
or foreign entry, or a cache dir that cannot be written, only costs the parse. Only values that
JSON gives back unchanged are kept (no YAML dates, no keys that are not strings). What a user
writes is never read through here: its file-and-line marks are what its errors name.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from gpunode import durable


def folder() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpunode" / "tables"


def key(text: str, *code: str | Path) -> str:
    """The entry's key: the table's text and the source files of the code that parses it."""
    digest = hashlib.sha256()
    for path in (__file__, *code):
        digest.update(Path(path).read_bytes() + b"\0")
    digest.update(text.encode())
    return digest.hexdigest()


def get(key: str, name: str) -> Any:
    """The value kept for (key, name); None where there is none to trust."""
    try:
        with open(folder() / f"{key}.{name}.json", encoding="utf-8") as entry:
            if os.fstat(entry.fileno()).st_uid != os.getuid():
                return None  # a shared XDG_CACHE_HOME: another user's entry would steer this user's plans
            doc = json.load(entry)
        return doc["value"] if doc["key"] == key and doc["name"] == name else None
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent, half-written or from another format


def put(key: str, name: str, value: Any) -> None:
    try:
        text = json.dumps({"key": key, "name": name, "value": value})
    except (TypeError, ValueError):
        return  # a value JSON has no form for (a YAML date): parsed each time
    if json.loads(text)["value"] != value:
        return  # a value JSON would change (a key that is no string): likewise
    where = folder()
    with contextlib.suppress(OSError):  # a cache dir that cannot be written only costs the next run the parse
        durable.write_atomic(where / f"{key}.{name}.json", text.encode())  # a reader sees the whole entry or none
        _prune(where, key, name)


#: An entry of another text or code of the same table, untouched this long, is removed when a new one
#: is written: each kb.refresh and each upgrade of gpunode would otherwise leave ~0.5 MB behind. Another
#: checkout still in use loses its entry at most once a day, and parses the table again.
STALE_S = 86400


def _prune(where: Path, key: str, name: str) -> None:
    now = time.time()
    for entry in where.glob(f"*.{name}.json"):
        if entry.name.partition(".")[2] != f"{name}.json" or entry.name.startswith(f"{key}."):
            continue  # another table's name that ends alike ("a.b" and "b"), or the entry just written
        with contextlib.suppress(OSError):
            if now - entry.stat().st_mtime > STALE_S:
                entry.unlink()
