"""The knobs `inv tune` may turn (compat/tune.yml): only those whose rule matches the engine, its
version and the model, each value turned into inventory variables the resolver reads."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpunode.errors import InventoryError, ResolveError
from gpunode.resolve import versions

TABLE = Path(__file__).resolve().parent.parent / "compat" / "tune.yml"
CONDITIONS = ("hybrid", "mtp_weights", "gpu")
KEYS = {"id", "engine", "versions", "variable", "flag", "when", "values", "why", "source"}


@dataclass(frozen=True)
class Knob:
    id: str
    engine: str
    versions: str
    values: tuple[Any, ...]
    why: str
    source: str
    variable: str = ""      # an inventory variable the resolver reads
    flag: str = ""          # or one flag appended to extra_args
    when: dict[str, bool] = field(default_factory=dict)

    def value(self, raw: Any, concurrency: int) -> Any:
        return concurrency if raw == "concurrency" else raw

    def overrides(self, value: Any, extra_args: tuple[str, ...]) -> dict[str, Any]:
        """The inventory variables that give this knob `value` (extra_args: what the inventory appends
        already, kept, without an earlier value of this flag)."""
        if self.variable:
            return {self.variable: value}
        kept: list[str] = []
        skip = False
        for a in extra_args:
            if skip:
                skip = False
                continue
            if a == self.flag:
                skip = True
                continue
            if a.startswith(self.flag + "="):
                continue
            kept.append(a)
        return {"extra_args": shlex.join([*kept, self.flag, str(value)])}


@dataclass(frozen=True)
class Model:
    """What a knob's `when` is checked against."""

    engine: str
    version: str
    hybrid: bool = False
    mtp_weights: bool = False
    gpu: bool = False


def load(path: Path = TABLE) -> list[Knob]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    out = []
    for i, row in enumerate(doc.get("knobs") or ()):
        where = f"{path.name} knobs[{i}]"
        unknown = set(row) - KEYS
        if unknown:
            raise ResolveError(f"{where}: unknown keys {', '.join(sorted(unknown))}", hint=f"keys: {sorted(KEYS)}")
        if bool(row.get("variable")) == bool(row.get("flag")):
            raise ResolveError(f"{where} ({row.get('id')}): give exactly one of variable or flag")
        if not row.get("source") or not row.get("values"):
            raise ResolveError(f"{where} ({row.get('id')}): every knob needs values and a source")
        when = dict(row.get("when") or {})
        if set(when) - set(CONDITIONS):
            raise ResolveError(f"{where}: unknown condition in when: {sorted(set(when) - set(CONDITIONS))}")
        out.append(Knob(id=row["id"], engine=row["engine"], versions=str(row.get("versions") or ""),
                        values=tuple(row["values"]), why=" ".join(str(row.get("why") or "").split()),
                        source=" ".join(str(row["source"]).split()), variable=row.get("variable") or "",
                        flag=row.get("flag") or "", when=when))
    return out


def matching(knobs: list[Knob], model: Model) -> list[Knob]:
    return [k for k in knobs if k.engine == model.engine and versions.matches(model.version, k.versions or None)
            and all(getattr(model, c) == want for c, want in k.when.items())]


def choose(knobs: list[Knob], model: Model, only: str | None) -> list[Knob]:
    """The knobs that apply here; `only` (comma-separated ids) narrows them, and names one that does not
    apply as an error rather than silently tuning nothing."""
    fit = matching(knobs, model)
    if not only:
        return fit
    want = [x.strip() for x in only.split(",") if x.strip()]
    ids = {k.id for k in fit}
    missing = [w for w in want if w not in ids]
    if missing:
        every = {k.id for k in knobs}
        here = f"no rule for {model.engine} {model.version} and this model"
        why = ", ".join(f"{m} ({here if m in every else 'unknown'})" for m in missing)
        raise InventoryError(f"--knobs: {why}", hint=f"knobs that apply here: {', '.join(sorted(ids)) or 'none'}")
    return [k for k in fit if k.id in want]


def model_of(plan: Any, facts: Any) -> Model:
    """What the knobs' conditions read, from a target's plan and facts."""
    m = getattr(facts, "model", None)
    hybrid = bool(m and m.hybrid_linear_attention) or any(d.decision == "mamba cache" for d in plan.decisions)
    return Model(engine=plan.engine, version=plan.engine_version, hybrid=hybrid,
                 mtp_weights=bool(m and m.mtp_weights), gpu=bool(getattr(facts, "gpus", ())))
