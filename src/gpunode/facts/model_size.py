"""How big a model's weights are when only its config (and maybe its index) is there.

Order: the index's metadata.total_size (the bytes of every tensor, written by the
exporter); else each part of the model (facts/model_parts.py) times the bytes
per parameter of that part's format. Quantized checkpoints are mixed precision:
gpt-oss keeps attention, router, embeddings and head in bf16 and only its
experts in MXFP4; ModelOpt's MIXED_PRECISION lists a format per module
(hf_quant_config.json quantized_layers), e.g. FP8 attention with NVFP4 MLPs;
the others name the modules they leave alone (modules_to_not_convert, ignore,
exclude_modules). Embeddings, routers, convolutions and vision towers stay in
the checkpoint's dtype unless a per-module table says otherwise. The source
string says which was used and how the bytes split.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from gpunode.facts.model_parts import FAMILIES, family, parts, text_config

# bytes per parameter: quantized formats carry block scales (NVFP4: one FP8 scale per 16
# values, MXFP4: one E8M0 scale per 32, AWQ/GPTQ: a 16-bit scale and zero per 128)
BYTES = {"nvfp4": 0.5625, "mxfp4": 0.53125, "int4": 0.53125, "fp8": 1.0, "int8": 1.0,
         "bfloat16": 2.0, "float16": 2.0, "float32": 4.0}
_ALIASES = (("mxfp4", "mxfp4"), ("nvfp4", "nvfp4"), ("fp4", "nvfp4"), ("fp8", "fp8"), ("w8a8", "int8"),
            ("int8", "int8"), ("awq", "int4"), ("gptq", "int4"), ("int4", "int4"), ("w4a", "int4"),
            ("bf16", "bfloat16"), ("bfloat16", "bfloat16"), ("fp16", "float16"), ("float16", "float16"),
            ("float32", "float32"))
_WRAPPERS = ("model.language_model.", "language_model.model.", "language_model.", "model.", "backbone.")
# parts no quantizer touches unless a per-module table names them
_KEPT = re.compile(r"(^embed_tokens$|^visual$|\.conv1d$|\.mlp\.gate$|\.router$|\.in_proj_[ab]$|\.in_proj_ba$"
                   r"|\.eh_proj$|^mtp\.fc$|^lm_head$)")


def format_of(name: str | None) -> str | None:
    """'nvfp4', 'fp8', 'bfloat16', ... for a quant_algo, quant_method or dtype; None when unknown."""
    low = (name or "").lower()
    return next((fmt for mark, fmt in _ALIASES if mark in low), None)


def _bare(module: str) -> str:
    for prefix in _WRAPPERS:
        if module.startswith(prefix):
            module = module[len(prefix):]
            break
    return re.sub(r"\.experts(\.\d+)?(\..*)?$", ".experts", module)


def _group_format(w: dict[str, Any]) -> str | None:
    """A compressed-tensors weight spec as a format; integer ones with a group size carry a bf16 scale
    (and a zero point when asymmetric) per group: 'int4/32' is 4 bits + 16/32 bits per weight."""
    bits, kind = w.get("num_bits"), w.get("type")
    if kind == "float":
        return "nvfp4" if bits == 4 else "fp8" if bits == 8 else None
    # integer weights of any width compressed-tensors writes (2 to 8 bits), each at its own bits: a 3-bit
    # or 2-bit group is not counted at the checkpoint's dtype, nor as 4-bit
    if isinstance(bits, bool) or not isinstance(bits, int) or not 2 <= bits <= 8:
        return None
    group = w.get("group_size")
    if isinstance(group, int) and group > 0:
        per = 2 * (1 if w.get("symmetric", True) else 2)
        fmt = f"int{bits}/{group}{'' if per == 2 else 'z'}"
        _RATES[fmt] = bits / 8 + per / group
        return fmt
    # per channel (no group): one scale a row, nothing a weight
    _RATES.setdefault(f"int{bits}", bits / 8)
    return f"int{bits}"


_RATES: dict[str, float] = {}


def _rate(fmt: str) -> float:
    return BYTES.get(fmt) or _RATES[fmt]


def _table(config: dict[str, Any], hf_quant: dict[str, Any] | None) \
        -> tuple[dict[str, str], str | None, list[tuple[str, str]]]:
    """({bare module name: format}, the format of every other linear layer or None, [(regex target, format)])
    from a per-module list (ModelOpt MIXED_PRECISION) or compressed-tensors groups, whose targets are
    module names, "re:" patterns (e.g. only the routed experts) or a class ("Linear": every linear layer
    the ignore list does not name)."""
    q = text_config(config).get("quantization_config")
    layers = ((hf_quant or {}).get("quantization") or {}).get("quantized_layers") \
        or (q.get("quantized_layers") if isinstance(q, dict) else None)
    out: dict[str, str] = {}
    if isinstance(layers, dict):
        for module, spec in layers.items():
            fmt = format_of(spec.get("quant_algo")) if isinstance(spec, dict) else None
            if fmt:
                out[_bare(str(module))] = fmt
        return out, None, []
    groups = q.get("config_groups") if isinstance(q, dict) else None
    every: str | None = None
    patterns: list[tuple[str, str]] = []
    for group in (groups or {}).values():
        if not isinstance(group, dict):
            continue
        fmt = _group_format(group.get("weights") or {})
        for target in group.get("targets") or []:
            if fmt and str(target) == "Linear":
                every = fmt
            elif fmt and str(target).startswith("re:"):
                patterns.append((str(target), fmt))
            elif fmt and "." in str(target):   # other class names are not module names
                out[_bare(str(target))] = fmt
    return out, every, patterns


def _bits_format(config: dict[str, Any]) -> str | None:
    """GPTQ / AWQ: bits and group size from quantization_config ("bits" / "w_bit", "group_size" /
    "q_group_size"); each group carries a 16-bit scale and a zero point, counted as 4 bytes a group: what
    GPTQ checkpoints of LLaMA-30B weigh on disk at 3 and 4 bits, groups of 32 and 128
    (tests/unit/test_model_size_checkpoints.py)."""
    q = text_config(config).get("quantization_config")
    if not isinstance(q, dict) or str(q.get("quant_method", "")).lower() not in _BITS_METHODS:
        return None
    bits, group = q.get("bits", q.get("w_bit")), q.get("group_size", q.get("q_group_size"))
    if isinstance(bits, bool) or not isinstance(bits, int) or not 2 <= bits <= 8:
        return None
    group = group if isinstance(group, int) and not isinstance(group, bool) and group > 0 else 0
    fmt = f"int{bits}/{group or 'channel'}"
    _RATES[fmt] = bits / 8 + (4 / group if group else 0)
    return fmt


_BITS_METHODS = ("gptq", "awq", "gptq_marlin", "awq_marlin", "marlin")


def _excluded(config: dict[str, Any], hf_quant: dict[str, Any] | None) -> list[str]:
    q = text_config(config).get("quantization_config")
    q = q if isinstance(q, dict) else {}
    found: list[str] = []
    for key in ("modules_to_not_convert", "ignore", "ignored_layers", "exclude_modules"):
        if isinstance(q.get(key), list):
            found += [str(p) for p in q[key]]
    hq = (hf_quant or {}).get("quantization") or {}
    if isinstance(hq.get("exclude_modules"), list):
        found += [str(p) for p in hq["exclude_modules"]]
    return [p if p.startswith("re:") else _bare(p) for p in found]


def _matches(name: str, patterns: list[str]) -> bool:
    """fnmatch for module names; compressed-tensors' "re:" patterns are regexes over the full name."""
    for p in patterns:
        if p.startswith("re:"):
            if any(re.fullmatch(p[3:], wrapped + name) for wrapped in ("", *_WRAPPERS)):
                return True
        elif fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(name, p + ".*") or name.startswith(p + ".") \
                or name == p:
            return True
    return False


def estimate(config: dict[str, Any], index: dict[str, Any] | None, quantization: str | None,
             dtype: str, hf_quant: dict[str, Any] | None = None) -> tuple[int, str]:
    """(bytes, how they were found); (0, why not) when neither the index nor the config tells."""
    meta = (index or {}).get("metadata")
    total = meta.get("total_size") if isinstance(meta, dict) else None
    if isinstance(total, int) and not isinstance(total, bool) and total > 0:
        return total, "model.safetensors.index.json metadata.total_size"
    kind = family(config)
    if kind not in FAMILIES:
        return 0, (f"unknown size: config.json's model_type {kind or '(none)'!r} is not a family whose shapes the "
                   "estimate knows (facts/model_parts.py FAMILIES), and no index total_size or weights say it")
    found = parts(config)
    if not found:
        return 0, "unknown size: config.json lacks the shapes to count parameters"
    base = format_of(dtype) or "bfloat16"
    table, every, patterns = _table(config, hf_quant)
    quant = every or _bits_format(config) or (format_of(quantization) if quantization else None)
    excluded = _excluded(config, hf_quant)
    by_format: dict[str, int] = {}
    for name, n in found:
        targeted = next((f for p, f in patterns if _matches(name, [p])), None)
        if table:
            fmt = table.get(name) or targeted or base
        elif (targeted or quant) and not _KEPT.search(name) and not _matches(name, excluded):
            fmt = targeted or quant or base
        else:
            fmt = base
        by_format[fmt] = by_format.get(fmt, 0) + n
    size = int(sum(n * _rate(fmt) for fmt, n in by_format.items()))
    total_params = sum(by_format.values())
    split = ", ".join(f"{n / 1e9:.1f}B {fmt} x {_rate(fmt):g}"
                      for fmt, n in sorted(by_format.items(), key=lambda kv: -kv[1]))
    unknown = f"; quantization {quantization!r} not known, counted as {base}" \
        if quantization and not quant and not table and not patterns else ""
    named = _named_by(config, hf_quant) if quant or table or patterns else ""
    return size, f"estimated from config.json: {total_params / 1e9:.1f}B parameters ({split} bytes){named}{unknown}"


def _named_by(config: dict[str, Any], hf_quant: dict[str, Any] | None) -> str:
    """Which file named the quantization: an FP8 repository may say it only in hf_quant_config.json."""
    if ((hf_quant or {}).get("quantization") or {}).get("quant_algo"):
        return "; quantization from hf_quant_config.json"
    return "; quantization from config.json quantization_config"
