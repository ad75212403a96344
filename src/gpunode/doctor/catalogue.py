"""The catalogue of known failures, read from compat/doctor.yml and checked when loaded."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpunode import yamlsrc
from gpunode.errors import InventoryError

PATH = Path(__file__).resolve().parents[1] / "compat" / "doctor.yml"
FIELDS = ("id", "title", "symptom", "cause", "fix", "gpunode", "sources", "detect")


@dataclass(frozen=True)
class Entry:
    id: str
    title: str
    symptom: str
    cause: str
    fix: str
    gpunode: str
    sources: tuple[str, ...]
    journal: tuple[re.Pattern[str], ...] = ()
    facts: tuple[str, ...] = ()


@cache
def load(path: Path = PATH) -> tuple[Entry, ...]:
    from gpunode.doctor.checks import CHECKS

    data = yamlsrc.table(path.read_text(encoding="utf-8"))
    entries = []
    for i, raw in enumerate(data.get("entries") or []):
        where = f"{path} entry {i + 1} ({raw.get('id', '?')})"
        missing = [k for k in FIELDS if not raw.get(k)]
        if missing or set(raw) - set(FIELDS):
            raise InventoryError(f"{where}: missing {missing} or unknown keys {sorted(set(raw) - set(FIELDS))}",
                                 hint=f"every entry has exactly {', '.join(FIELDS)}")
        detect = raw["detect"]
        unknown = [c for c in detect.get("facts", []) if c not in CHECKS]
        if unknown:
            raise InventoryError(f"{where}: unknown facts checks {unknown}", hint=f"known: {', '.join(CHECKS)}")
        entries.append(Entry(raw["id"], raw["title"], raw["symptom"].strip(), " ".join(raw["cause"].split()),
                             " ".join(raw["fix"].split()), " ".join(raw["gpunode"].split()),
                             tuple(raw["sources"]),
                             tuple(re.compile(p, re.IGNORECASE) for p in detect.get("journal", [])),
                             tuple(detect.get("facts", []))))
    return tuple(entries)
