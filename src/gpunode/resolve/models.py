"""Which model-family rule applies, and the engine versions it needs."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from gpunode.facts.types import Model
from gpunode.resolve import versions
from gpunode.resolve.kb import KB, Family, Variant


@dataclass(frozen=True)
class ModelRule:
    model: Model | None
    family: Family | None
    variants: tuple[Variant, ...]
    label: str                      # how messages name the model: "Qwen3.6-27B (Qwen3_5ForConditionalGeneration)"
    fact: str

    @property
    def hybrid(self) -> bool:
        return bool(self.family and self.family.hybrid_gdn) or bool(self.model and self.model.hybrid_linear_attention)

    def floor(self, engine: str) -> tuple[str | None, str]:
        """The lowest engine version that runs this model, and the rule's source."""
        best: tuple[str | None, str] = (None, "")
        rules = [(self.family.min_engine, self.family.source)] if self.family else []
        rules += [(v.min_engine, v.source) for v in self.variants]
        for mins, source in rules:
            low = mins.get(engine)
            if low and (best[0] is None or versions.parse(low) > versions.parse(best[0])):
                best = (low, source)
        return best


def match(model: Model | None, name_hint: str | None, kb: KB) -> ModelRule:
    if model is None:
        return ModelRule(None, None, (), "the model", "no model facts")
    base = name_hint or os.path.basename(model.path.rstrip("/")) or model.path
    arch = model.architectures[0] if model.architectures else model.model_type or "unknown architecture"
    label = f"{base} ({arch})"
    fact = f"model.architectures={list(model.architectures)}"
    family = next((f for f in kb.families if set(f.architectures) & set(model.architectures)), None)
    variants: tuple[Variant, ...] = ()
    if family:
        names = [n for n in (name_hint, os.path.basename(model.path.rstrip("/"))) if n]
        variants = tuple(v for v in family.variants if any(re.search(v.name_pattern, n) for n in names))
        if variants:
            fact += f"; name {base!r} matches {', '.join(v.id for v in variants)}"
    return ModelRule(model, family, variants, label, fact)
