"""compat/derived/sglang-choices.yml, read one pin set at a time.

The file (written by `inv kb.refresh`, gpunode/judge/derive.py) holds what every pin set's sglang
picks by itself, ~200 KiB of which a plan needs one pin set's part: parsing all of it cost every
plan ~80 ms. Its layout is `pinsets:` then each pin set at two spaces; each part is parsed on first
use, with the lines of the whole file (an error names the same line as before). A file laid out
otherwise (edited by hand) is parsed whole, as before.

Each pin set's parsed part is kept as JSON (gpunode.datacache, keyed by the whole file's text): a
plan weighs 4 or 5 pin sets, ~8-13 ms of YAML each. A cached part holds plain values, what the
resolver reads of it, without the file's line marks: those matter only for an error, and a part
with an error is never cached.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from gpunode import datacache, userfiles, yamlsrc
from gpunode.resolve.yamlread import KnowledgeBaseError

Picks = dict[str, dict[str, dict[str, Any]]]  # architecture -> compute capability -> what sglang picks

_PINSET = re.compile(r"^  (?P<id>[A-Za-z0-9][A-Za-z0-9._-]*):[ \t]*$")


class PinsetPicks(Mapping[str, Picks]):
    """pin set id -> its derived picks, each parsed when first asked for."""

    def __init__(self, path: Path) -> None:
        self.path = path
        text = userfiles.read_text(path, what="YAML file")
        self._key = datacache.key(text, __file__, yamlsrc.__file__)
        self._lines = text.splitlines(keepends=True)
        self._spans = _spans(self._lines)
        self._parsed: dict[str, Picks] = {}
        self._lock = threading.Lock()
        if self._spans is None:  # not the generated layout: all of it now, as before
            self._parsed = _choices(self._parse(0, len(self._lines)), path)

    def __getitem__(self, pid: str) -> Picks:
        with self._lock:
            if pid not in self._parsed:
                if self._spans is None or pid not in self._spans:
                    raise KeyError(pid)
                cached = datacache.get(self._key, pid)
                if not isinstance(cached, dict):
                    start, end = self._spans[pid]
                    cached = _choices({"pinsets": self._parse(start, end)}, self.path)[pid]
                    datacache.put(self._key, pid, cached)
                self._parsed[pid] = cached
            return self._parsed[pid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._spans if self._spans is not None else self._parsed)

    def __len__(self) -> int:
        return len(self._spans if self._spans is not None else self._parsed)

    def _parse(self, start: int, end: int) -> Any:
        # blank lines before the part keep each node's line that of the whole file
        text = "\n" * start + "".join(self._lines[start:end])
        try:
            return yamlsrc.load_text(text, str(self.path))
        except Exception as exc:  # yamlsrc raises InventoryError; here it is a knowledge-base problem
            raise KnowledgeBaseError(str(exc), hint=f"fix {self.path}") from None


def _spans(lines: list[str]) -> dict[str, tuple[int, int]] | None:
    """Each pin set's lines [start, end), or None where the file is not `pinsets:` and nothing else
    at the top level."""
    tops = [i for i, line in enumerate(lines) if line[:1] not in ("", " ", "#", "\n", "\t")]
    if len(tops) != 1 or lines[tops[0]].rstrip() != "pinsets:":
        return None
    starts = [(i, m["id"]) for i, line in enumerate(lines) if (m := _PINSET.match(line))]
    if not starts:
        return None
    ends = [i for i, _ in starts[1:]] + [len(lines)]
    spans = {pid: (i, end) for (i, pid), end in zip(starts, ends, strict=True)}
    return spans if len(spans) == len(starts) else None  # a pin set twice: the whole parse names it


def _choices(data: Any, path: Path) -> dict[str, Picks]:
    if data is None:
        return {}
    pinsets = data.get("pinsets") if isinstance(data, dict) else None
    if not isinstance(pinsets, dict):
        raise KnowledgeBaseError(f"{path}: no `pinsets:` mapping", hint="run `inv kb.refresh` to write it again")
    out = {}
    for pid, row in pinsets.items():
        choices = row.get("choices", {}) if isinstance(row, dict) else None
        if not isinstance(choices, dict):
            raise KnowledgeBaseError(f"{yamlsrc.where(pinsets, pid, str(path))}: pinsets.{pid}.choices is not a "
                                     "mapping", hint="run `inv kb.refresh` to write it again")
        out[str(pid)] = dict(choices)
    return out
