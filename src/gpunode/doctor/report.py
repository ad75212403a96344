"""doctor's answer for people (text) and for programs (the gpunode.doctor/1 document, docs/doctor.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpunode.doctor.checks import Evidence
from gpunode.doctor.detect import Finding

SCHEMA = "gpunode.doctor/1"


@dataclass
class TargetResult:
    """One target: what was read there and the entries that apply; error when it could not be read."""

    target: str
    evidence: Evidence | None = None
    findings: list[Finding] = field(default_factory=list)
    error: str = ""
    gathered_at: str = ""
    duration_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        ev = self.evidence
        return {
            "target": self.target,
            "gathered_at": self.gathered_at,
            "duration_s": self.duration_s,
            "error": self.error,
            "units": [{"name": u.name, "load": u.load, "active": u.active, "sub": u.sub, "result": u.result,
                       "restarts": u.restarts, "port": u.port} for u in (ev.units if ev else ())],
            "journal_lines": len(ev.journal) if ev else 0,
            "notes": list(ev.notes) if ev else [],
            "findings": [_finding(f) for f in self.findings],
        }


def _finding(f: Finding) -> dict[str, Any]:
    e = f.entry
    return {"id": e.id, "title": e.title, "symptom": e.symptom, "cause": e.cause, "fix": e.fix,
            "gpunode": e.gpunode, "sources": list(e.sources), "evidence": f.evidence, "via": f.via}


def document(results: list[TargetResult], run: str) -> dict[str, Any]:
    return {"schema": SCHEMA, "run": run, "findings": sum(len(r.findings) for r in results),
            "errors": sum(1 for r in results if r.error), "targets": [r.to_dict() for r in results]}


def text(r: TargetResult) -> str:
    """A target's findings: each entry's title, the evidence line, cause, fix, what gpunode does, sources."""
    if r.error:
        return f"{r.target}: could not be examined\n" + "\n".join(f"  {line}" for line in r.error.splitlines())
    ev = r.evidence
    assert ev is not None
    seen = (f"{len(ev.units)} gpunode unit(s), {len(ev.journal)} journal line(s)"
            + (f", read in {r.duration_s:.1f} s" if r.duration_s is not None else ""))
    if not r.findings:
        lines = [f"{r.target}: no known failure applies ({seen})"]
    else:
        lines = [f"{r.target}: {len(r.findings)} known failure(s) apply ({seen})"]
    for f in r.findings:
        e = f.entry
        lines += [f"  [{e.id}] {e.title}",
                  f"    seen     {f.evidence}" + ("" if f.via == "journal" else f"  ({f.via})"),
                  f"    cause    {e.cause}",
                  f"    fix      {e.fix}",
                  f"    gpunode  {e.gpunode}",
                  *(f"    source   {s}" for s in e.sources)]
    lines += [f"  note: {n}" for n in ev.notes]
    return "\n".join(lines)
