"""SGLang attention backend: legality per architecture and version, and the default."""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.resolve import versions
from gpunode.resolve.kb import Arch, HybridRow


@dataclass(frozen=True)
class Verdict:
    level: str          # "ok" | "warn" | "forbidden"
    reason: str
    rule: str
    source: str


def hybrid_row(arch: Arch, version: str) -> HybridRow | None:
    return next((h for h in arch.hybrid_gdn if versions.matches(version, h.engine or None)), None)


def judge(arch: Arch, backend: str, version: str, hybrid: bool) -> Verdict:
    if backend in arch.attention_forbidden:
        return Verdict("forbidden", arch.attention_forbidden[backend], f"{arch.where} archs[{arch.cc}].attention",
                       arch.source)
    refused = arch.attention_refused.get(backend)
    if refused and versions.matches(version, refused.engine):
        return Verdict("forbidden", f"SGLang {version} refuses it on compute capability {arch.cc}: {refused.reason}",
                       f"{arch.where} archs[{arch.cc}].attention.refused", refused.source)
    row = hybrid_row(arch, version) if hybrid else None
    if row and backend not in row.allowed:
        return Verdict("forbidden", f"SGLang {version} accepts only {', '.join(row.allowed)} for hybrid Gated "
                       f"DeltaNet models on compute capability {arch.cc}", f"{arch.where} archs[{arch.cc}].hybrid_gdn",
                       row.source)
    if backend not in arch.attention_allowed:
        return Verdict("forbidden", f"{backend} is not among the backends known to work on compute capability "
                       f"{arch.cc} ({', '.join(arch.attention_allowed)})", f"{arch.where} archs[{arch.cc}].attention",
                       arch.source)
    warned = arch.attention_warn.get(backend)
    if warned and versions.matches(version, warned.engine):
        return Verdict("warn", warned.reason, f"{arch.where} archs[{arch.cc}].attention.warn", arch.source)
    return Verdict("ok", "", f"{arch.where} archs[{arch.cc}].attention", arch.source)


def default(arch: Arch, version: str, hybrid: bool) -> tuple[str, str, str]:
    """The backend the plan passes when the user chose none: (backend, reason, source)."""
    row = hybrid_row(arch, version) if hybrid else None
    if row and row.default:
        return row.default, (f"SGLang {version} on compute capability {arch.cc} needs it for hybrid Gated DeltaNet "
                             f"models (allowed: {', '.join(row.allowed)})"), row.source
    backend = arch.attention_default
    if row and backend not in row.allowed:
        backend = next(b for b in row.allowed if b in arch.attention_allowed)
        return backend, (f"the architecture default {arch.attention_default} is rejected for hybrid Gated DeltaNet "
                         f"models by SGLang {version}; first allowed: {backend}"), row.source
    why = f"the default for compute capability {arch.cc} ({arch.name})"
    if row:
        why += f"; SGLang {version} allows {', '.join(row.allowed)} for hybrid Gated DeltaNet models"
    if arch.attention_forbidden:
        why += "; not " + ", ".join(f"{b} ({r})" for b, r in arch.attention_forbidden.items())
    return backend, why, arch.source
