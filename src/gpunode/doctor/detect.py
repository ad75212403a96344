"""Which catalogue entries apply to a target, each with the line that shows it."""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.doctor.catalogue import Entry, load
from gpunode.doctor.checks import CHECKS, Evidence


@dataclass(frozen=True)
class Finding:
    entry: Entry
    evidence: str       # the journal line or the facts that show it
    via: str            # "journal" or the check's name

    def to_dict(self, target: str) -> dict:
        e = self.entry
        return {"v": 1, "type": "doctor", "target": target, "id": e.id, "title": e.title,
                "evidence": self.evidence, "via": self.via, "fix": e.fix, "sources": list(e.sources)}


def diagnose(ev: Evidence, entries: tuple[Entry, ...] | None = None) -> list[Finding]:
    """Every entry that applies, in catalogue order; the newest journal line is the evidence."""
    found = []
    for entry in entries if entries is not None else load():
        hit = next((Finding(entry, line.strip()[:400], "journal") for line in reversed(ev.journal)
                    for p in entry.journal if p.search(line)), None)
        if hit is None:
            for name in entry.facts:
                shown = CHECKS[name](ev)
                if shown:
                    hit = Finding(entry, shown, name)
                    break
        if hit is not None:
            found.append(hit)
    return found
