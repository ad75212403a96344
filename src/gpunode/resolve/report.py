"""What scripts read besides the plan: the facts the resolver was given, and a
refusal document (schema "gpunode.refusal/1", docs/resolve.md) when it refuses.

Within one schema id fields are only ever added, as for the plan.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gpunode.errors import GpunodeError, ResolveError
from gpunode.facts.types import Facts

REFUSAL_SCHEMA = "gpunode.refusal/1"


@dataclass(frozen=True)
class Blocker:
    check: str                  # "driver", "glibc", "python", "machine", "model", "attention", "nvcc", "gpu", ...
    text: str                   # "driver 565.57.01 < 570 (compute capability 12.0)"
    unblock: str                # what would remove it
    pinset: str | None = None   # the candidate it blocked; None for a rule that holds for every pin set
    have: str = ""
    need: str = ""


class Refusal(ResolveError):
    """A ResolveError that knows each blocker and what would unblock it."""

    def __init__(self, message: str, *, blockers: tuple[Blocker, ...], hint: str = "", target: str = "",
                 evidence: str = ""):
        super().__init__(message, hint=hint, target=target, evidence=evidence)
        self.blockers = blockers


def facts_view(facts: Facts) -> dict[str, Any]:
    """The facts a plan was made from, as scripts check them: GPUs with compute capability, driver, CUDA."""
    s = facts.system
    return {
        "target": facts.target,
        "gpus": [{"index": g.index, "name": g.name, "memory_mib": g.memory_mib, "compute_cap": g.compute_cap,
                  "compute_cap_source": g.compute_cap_source, "pci_bus_id": g.pci_bus_id, "mig_mode": g.mig_mode,
                  **({"mig_devices": [{"index": d.index, "profile": d.profile, "memory_mib": d.memory_mib,
                                       "uuid": d.uuid} for d in g.mig_devices]} if g.mig_devices else {})}
                 for g in facts.gpus],
        "driver": {"version": facts.driver.version, "cuda": facts.driver.cuda},
        "system": {"os": f"{s.os_id} {s.os_version}".strip(), "arch": s.arch, "glibc": s.glibc,
                   "pythons": list(s.pythons), "default_python": s.default_python, "in_container": s.in_container,
                   "toolkits": [{"path": t.path, "version": t.version, "kind": t.kind} for t in s.toolkits]},
        "problems": list(facts.problems),
    }


def _blockers(exc: GpunodeError) -> list[dict[str, Any]]:
    found = getattr(exc, "blockers", None)
    if found:
        return [{"check": b.check, "pinset": b.pinset, "text": b.text, "have": b.have, "need": b.need,
                 "unblock": b.unblock} for b in found]
    # a rule that holds whatever the pin set (the model does not fit, a bad variable, an unreadable file)
    # by the class's kind, so that a ResolveError subclass (topology.DoesNotFit) is a rule too
    kind = next((k for cls, k in (("ResolveError", "rule"), ("InventoryError", "inventory"), ("FactError", "facts"))
                 if cls in {c.__name__ for c in type(exc).__mro__}), "error")
    return [{"check": kind, "pinset": None, "text": exc.message, "have": "", "need": "", "unblock": exc.hint}]


def refusal(exc: GpunodeError, facts: Facts | None) -> dict[str, Any]:
    return {
        "schema": REFUSAL_SCHEMA,
        "target": exc.target or (facts.target if facts else ""),
        "error": "ResolveError" if isinstance(exc, ResolveError) else type(exc).__name__,
        "message": exc.message,
        "hint": exc.hint,
        "evidence": exc.evidence,
        "blockers": _blockers(exc),
        "facts": facts_view(facts) if facts else None,
    }


def refusal_json(exc: GpunodeError, facts: Facts | None, indent: int | None = 2) -> str:
    return json.dumps(refusal(exc, facts), indent=indent, ensure_ascii=False)
