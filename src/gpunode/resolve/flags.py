"""Launch arguments: each flag under the name that exists in the chosen engine version."""

from __future__ import annotations

from gpunode.errors import ResolveError
from gpunode.resolve import attention, conditions, remote_code, versions
from gpunode.resolve.choices import Choices
from gpunode.resolve.hardware import GpuSet
from gpunode.resolve.kb import KB, Arch, FamilyAttention, FlagRow, Pinset
from gpunode.resolve.models import ModelRule
from gpunode.resolve.trail import Trail

# options the plan sets itself -> the inventory variable that changes them
OWNED = {"model": "model_path", "served_model_name": "served_model_name", "host": "host", "port": "base_port",
         "mem_fraction": "mem_fraction", "context_length": "context_length", "tp": "tp",
         "attention_backend": "attention_backend", "mamba_strategy": "mamba_strategy",
         "kv_cache_bytes": "kv_cache_bytes", "max_num_seqs": "max_num_seqs"}


def row(kb: KB, option: str, engine: str, version: str) -> FlagRow | None:
    o = kb.options.get(option)
    if o is None:
        return None
    return next((r for r in o.rows.get(engine, ()) if versions.matches(version, r.engine)), None)


def flag(kb: KB, option: str, engine: str, version: str) -> str:
    r = row(kb, option, engine, version)
    if r is None:
        raise ResolveError(f"flags.yml has no {option} flag for {engine} {version}",
                           hint=f"add a row for {engine} {version} to options.{option} in gpunode/compat/flags.yml")
    return r.flag


def check_extra(kb: KB, p: Pinset, extra: tuple[str, ...], target: str, trail: Trail) -> None:
    """Refuse extra_args that name removed flags or flags the plan already sets."""
    given = {a.split("=", 1)[0] for a in extra if a.startswith("--")}
    for name, o in kb.options.items():
        for r in o.rows.get(p.engine, ()):
            inside = versions.matches(p.version, r.engine)
            for old in given & set(r.removed if inside else ()):
                raise ResolveError(f"extra_args: {old} does not exist in {p.engine} {p.version}; it is now {r.flag}",
                                   target=target, evidence=f"rule: {o.where}; source: {r.source}",
                                   hint=f"use the {OWNED.get(name, name)} variable or {r.flag}")
            for old in given & set(r.deprecated if inside else ()):
                trail.warn(f"extra_args: {old} is a deprecated alias of {r.flag} in {p.engine} {p.version}")
            if inside and r.flag in given and name in OWNED:
                raise ResolveError(f"extra_args: {r.flag} is set by the plan already", target=target,
                                   hint=f"set it through the {OWNED[name]} variable instead")


def decide_mtp(kb: KB, p: Pinset, rule: ModelRule, choices: Choices, target: str, trail: Trail) -> bool:
    fam = rule.family
    spec = fam.mtp.get(p.engine) if fam else None
    weights = bool(rule.model and rule.model.mtp_weights)
    fact = (f"model.mtp_weights={weights}; model.mtp_config={bool(rule.model and rule.model.mtp_config)}"
            if rule.model else "no model facts")
    if choices.mtp == "false":
        trail.decide("MTP", "off", "mtp: false set by the inventory", fact=fact, rule="choices.mtp")
        return False
    if spec is None:
        if choices.mtp == "true":
            raise ResolveError(f"mtp: true, but models.yml has no MTP rule for {rule.label} on {p.engine}",
                               target=target, hint="set mtp: auto or false")
        trail.decide("MTP", "off", f"no MTP rule for this model on {p.engine}", fact=fact)
        return False
    if not weights:
        if choices.mtp == "true":
            raise ResolveError(f"mtp: true, but {rule.label} has no MTP weights (no mtp.* tensors)", target=target,
                               evidence=fact, hint="stage a checkpoint that keeps its MTP layer, or set mtp: auto")
        trail.decide("MTP", "off", "the checkpoint has no mtp.* weights, so no speculative-decoding flags are "
                     "emitted (the config alone is not enough)", fact=fact, rule=fam.where if fam else "",
                     source="docs/sources.md#mtp-weights")
        return False
    trail.decide("MTP", "on (EAGLE 3/1/4)", "the checkpoint has mtp.* weights" +
                 (" and mtp: true" if choices.mtp == "true" else " (mtp: auto)"),
                 fact=fact, rule=fam.where if fam else "", source=spec.source)
    return True


def mamba(kb: KB, p: Pinset, rule: ModelRule, choices: Choices, mtp: bool, target: str,
          trail: Trail) -> list[str]:
    """The mamba cache strategy: MTP's rule, the inventory's choice, or SGLang's own (no flag at all)."""
    if not rule.hybrid or p.engine != "sglang":
        return []
    fam = rule.family
    r = row(kb, "mamba_strategy", p.engine, p.version)
    if r is None:
        raise ResolveError(f"flags.yml has no mamba cache flag for sglang {p.version}", target=target,
                           hint="add a row to options.mamba_strategy in gpunode/compat/flags.yml")
    spec = fam.mtp.get(p.engine) if fam else None
    if mtp and spec:
        value, why, src = spec.mamba_strategy, "MTP needs the extra_buffer (V2) mamba cache", spec.source
        if choices.mamba_strategy and choices.mamba_strategy != value:
            raise ResolveError(f"mamba_strategy: {choices.mamba_strategy} breaks a rule: speculative decoding "
                               f"needs {value} (SGLang raises an error with no_buffer and the radix cache)",
                               target=target, hint="drop mamba_strategy or set mtp: false")
    elif choices.mamba_strategy:
        value, why, src = choices.mamba_strategy, "set by the inventory (mamba_strategy)", r.source
    elif fam and fam.mamba_strategy:
        value, why, src = fam.mamba_strategy, "the family's rule", fam.mamba_strategy_source
    else:
        trail.decide("mamba cache", "left to SGLang (no flag)",
                     f"no rule knows better than sglang {p.version}'s own choice ({r.flag} auto); "
                     "set mamba_strategy: no_buffer where the extra buffer runs out of memory",
                     fact="hybrid Gated DeltaNet model", rule=kb.options["mamba_strategy"].where,
                     source=f"docs/sources.md#field-notes (no_buffer after memory trouble on RTX PRO 6000); {r.source}")
        return []
    if r.values and value not in r.values:
        raise ResolveError(f"mamba cache strategy {value} does not exist in sglang {p.version} "
                           f"(it accepts {', '.join(r.values)})", target=target, hint="choose one of those")
    needs = list(r.requires.get(value, ()))
    trail.decide("mamba cache", " ".join([r.flag, value, *needs]),
                 f"{why}; the flag is named {r.flag} in sglang {p.version}"
                 + (f", whose own checks require {' '.join(needs)} with {value}" if needs else ""),
                 fact="hybrid Gated DeltaNet model", rule=kb.options["mamba_strategy"].where,
                 source=f"{src}; {r.source}")
    return [r.flag, value, *needs]


def engine_args(kb: KB, p: Pinset, gpus: GpuSet | None, rule: ModelRule, choices: Choices, mem_fraction: float,
                tp: int, mtp: bool, target: str, trail: Trail) -> list[str]:
    """Everything after --host/--port, the same for every server of the plan."""
    e, v = p.engine, p.version
    args: list[str] = []
    if e == "sglang":
        args.append(flag(kb, "metrics", e, v))  # Prometheus /metrics for inv status and scrapers
    if remote_code.decide(kb, p, rule, choices.trust_remote_code, gpus.arch.cc if gpus else None, trail):
        args.append(flag(kb, "trust_remote_code", e, v))
    if e == "sglang" and gpus:
        args += _attention(kb, p, gpus, rule, choices, trail)
    if e in ("sglang", "vllm"):
        args += [flag(kb, "mem_fraction", e, v), str(mem_fraction)]
        if tp > 1:
            args += [flag(kb, "tp", e, v), str(tp)]
            args += list(gpus.arch.tp_args.get(e, ())) if gpus else []
    if e == "vllm-cpu":
        args += [flag(kb, "kv_cache_bytes", e, v), str(choices.kv_cache_bytes)]
        args += [flag(kb, "context_length", e, v), str(choices.context_length or 2048)]
        args += [flag(kb, "max_num_seqs", e, v), str(choices.max_num_seqs), flag(kb, "enforce_eager", e, v)]
    elif choices.context_length:
        args += [flag(kb, "context_length", e, v), str(choices.context_length)]
        trail.decide("context length", choices.context_length, "set by the inventory (context_length)")
        if choices.context_length < 131072 and rule.family and rule.family.id.startswith("qwen3_5"):
            trail.warn("context_length below 128K: the Qwen3.6 cookbook keeps at least 128K so thinking still works")
    args += mamba(kb, p, rule, choices, mtp, target, trail)
    fam = rule.family
    parsers = fam.parsers.get(e) if fam else None
    if fam and parsers:
        if parsers.reasoning:
            args += [flag(kb, "reasoning_parser", e, v), parsers.reasoning]
        if parsers.tool_call:
            args += [flag(kb, "tool_call_parser", e, v), parsers.tool_call]
        args += list(parsers.args)
        trail.decide("parsers", f"reasoning {parsers.reasoning}, tool calls {parsers.tool_call}",
                     f"the {fam.name} family rule for {e}", fact=rule.fact, rule=fam.where, source=fam.source)
    if mtp and rule.family:
        args += list(rule.family.mtp[e].args)
    args += _family_extra(rule, p, gpus, trail)
    check_extra(kb, p, choices.extra_args, target, trail)
    if choices.extra_args:
        args += list(choices.extra_args)
        trail.decide("extra args", " ".join(choices.extra_args), "appended as given by the inventory (extra_args)")
    return args


def _attention(kb: KB, p: Pinset, gpus: GpuSet, rule: ModelRule, choices: Choices, trail: Trail) -> list[str]:
    arch = gpus.arch
    fact = f"compute capability {arch.cc}; sglang {p.version}; hybrid_gdn={rule.hybrid}"
    fam_row = family_attention(rule, arch.cc, p.version)
    if fam_row and rule.family:
        kind = rule.family.attention_kind or rule.family.name
        backend = choices.attention_backend or fam_row.default
        if backend not in fam_row.allowed:
            raise ResolveError(f"attention_backend: {backend} breaks a rule: sglang {p.version} runs {rule.label} "
                               f"({kind}) on compute capability {arch.cc} only with {', '.join(fam_row.allowed)}",
                               evidence=f"rule: {rule.family.where}; source: {fam_row.source}",
                               hint=f"drop attention_backend to get {fam_row.default}, or choose one of those")
        how = ("set by the inventory (attention_backend) and allowed" if choices.attention_backend
               else "the family's default")
        trail.decide("attention backend", backend,
                     f"{how} for {kind} models on compute capability {arch.cc} in sglang {p.version} "
                     f"(allowed: {', '.join(fam_row.allowed)}); the architecture's default "
                     f"{arch.attention_default} is not used for this family",
                     fact=fact + f"; family {rule.family.id}", rule=rule.family.where, source=fam_row.source)
        return [flag(kb, "attention_backend", p.engine, p.version), backend]
    if choices.attention_backend:
        backend = choices.attention_backend
        verdict = attention.judge(arch, backend, p.version, rule.hybrid)
        if verdict.level == "forbidden":  # pick() already refused; kept for direct callers
            raise ResolveError(f"attention_backend: {backend} breaks a rule: {verdict.reason}",
                               hint="drop attention_backend to use the architecture's default")
        if verdict.level == "warn":
            trail.warn(f"attention_backend {backend}: {verdict.reason}")
        trail.decide("attention backend", backend, "set by the inventory (attention_backend) and allowed here",
                     fact=fact, rule=verdict.rule, source=verdict.source)
    else:
        preferred = _preferred(kb, p, arch, rule, choices, fact, trail)
        if preferred:
            return preferred
        if not _derived(kb, p, rule, arch.cc):
            # no rule names this architecture and nothing says what SGLang picks for it: its own choice (a
            # per-model override such as DeepSeek-V4's dsv4) is kept, not the GPU's default for other models
            name = rule.model.architectures[0] if rule.model and rule.model.architectures else "this model"
            trail.decide("attention backend", "left to SGLang",
                         f"no rule names {name}, and what sglang {p.version} picks for it on compute capability "
                         f"{arch.cc} is not derived (inv kb.refresh judges the reference configs only); gpunode "
                         f"passes no flag rather than the default for other models ({arch.attention_default})",
                         fact=fact, rule=f"{arch.where} archs[{arch.cc}]", source=DERIVED_SOURCE)
            return _mm_attention(kb, p, arch, rule, fact, trail)
        backend, why, source = attention.default(arch, p.version, rule.hybrid)
        own = _sglang_pick(kb, p, rule, arch.cc)
        if own is not None and _holds(arch, own, p.version, rule):
            said = attention.judge(arch, own, p.version, rule.hybrid)
            if said.level == "warn":
                # a caveat whose source names other architectures (or none) does not overrule SGLang's pick
                trail.warn(f"attention backend {own} (SGLang's own pick for {rule.label}): {said.reason}; the "
                           f"rule's source names no failure of {_architecture(rule)}, so SGLang's choice stands")
            trail.decide("attention backend", f"left to SGLang ({own})",
                         f"sglang {p.version} picks {own} itself for {rule.label} on compute capability {arch.cc}, "
                         f"and no sourced rule says it fails there for {_architecture(rule)}; gpunode passes no flag",
                         fact=fact, rule=f"{arch.where} archs[{arch.cc}]", source=DERIVED_SOURCE)
            return _mm_attention(kb, p, arch, rule, fact, trail)
        refused = _sglang_rejects(kb, p, rule, arch.cc).get(f"--attention-backend {backend}")
        if own is not None and refused:
            caveat = attention.judge(arch, own, p.version, rule.hybrid).reason
            trail.warn(f"attention backend: sglang {p.version} rejects the architecture's default {backend} for "
                       f"{rule.label} ({refused}), so its own choice {own} is kept: {caveat}")
            trail.decide("attention backend", f"left to SGLang ({own})",
                         f"sglang {p.version} rejects {backend} for this model and picks {own} itself",
                         fact=fact, rule=f"{arch.where} archs[{arch.cc}]", source=DERIVED_SOURCE)
            return _mm_attention(kb, p, arch, rule, fact, trail)
        if own is not None:
            why += f"; sglang {p.version} would pick {own} itself here, which a rule says fails: " + \
                attention.judge(arch, own, p.version, rule.hybrid).reason
            source += f"; {DERIVED_SOURCE}"
        trail.decide("attention backend", backend, why, fact=fact, rule=f"{arch.where} archs[{arch.cc}]",
                     source=source)
    return [flag(kb, "attention_backend", p.engine, p.version), backend, *_mm_attention(kb, p, arch, rule, fact, trail)]


DERIVED_SOURCE = "compat/derived/sglang-choices.yml (inv kb.refresh: the pinned sglang's own choice)"


# sglang 0.5.23 srt/arg_groups/mamba_hook.py validate_mamba_no_buffer, as tests/test_sglang_judge.py met it
NO_BUFFER_TRTLLM = ("AssertionError: no_buffer do not support trtllm_mha attention backend (sglang 0.5.23 "
                    "srt/arg_groups/mamba_hook.py validate_mamba_no_buffer)")


def _preferred(kb: KB, p: Pinset, arch: Arch, rule: ModelRule, choices: Choices, fact: str,
               trail: Trail) -> list[str]:
    """The family's recipe backend where a rule with a source says SGLang's own pick is slower there;
    [] when no rule says so, or when the architecture's rows or the pinned sglang reject it."""
    fam = rule.family
    pref = next((x for x in fam.attention_prefer if arch.cc in x.cc and versions.matches(p.version, x.engine)),
                None) if fam else None
    if fam is None or pref is None:
        return []
    own = _sglang_pick(kb, p, rule, arch.cc)
    verdict = attention.judge(arch, pref.backend, p.version, rule.hybrid)
    refused = _sglang_rejects(kb, p, rule, arch.cc).get(f"--attention-backend {pref.backend}")
    if pref.backend == "trtllm_mha" and choices.mamba_strategy == "no_buffer":
        # the derived data judges each choice alone; this pair SGLang refuses together
        refused = (f"mamba_strategy: no_buffer is set, and the pair is not derived (each choice is judged alone); "
                   f"SGLang refuses it: {NO_BUFFER_TRTLLM}")
    if verdict.level == "forbidden" or refused:
        trail.warn(f"the {fam.name} rule prefers attention backend {pref.backend} on compute capability {arch.cc}, "
                   f"but {refused or verdict.reason} (sglang {p.version}); SGLang's own choice is kept")
        return []
    instead = f"sglang {p.version} would pick {own} itself here" if own else \
        f"what sglang {p.version} picks itself for {rule.label} is not derived"
    trail.decide("attention backend", pref.backend,
                 f"the {fam.name} rule for compute capability {arch.cc}: {pref.why}; {instead}",
                 fact=fact + f"; family {fam.id}", rule=f"{fam.where} attention_prefer",
                 source=f"{pref.source}; {DERIVED_SOURCE}" if own else pref.source)
    if verdict.level == "warn":
        trail.warn(f"attention backend {pref.backend}: {verdict.reason}")
    return [flag(kb, "attention_backend", p.engine, p.version), pref.backend,
            *_mm_attention(kb, p, arch, rule, fact, trail)]


def _sglang_pick(kb: KB, p: Pinset, rule: ModelRule, cc: str) -> str | None:
    """The attention backend the pin set's sglang picks by itself for this model's architecture, if derived."""
    if not rule.model or not rule.model.architectures:
        return None
    picked = kb.sglang_pick(p.id, rule.model.architectures[0], cc, rule.model.model_type,
                            rule.model.quantization_form) or {}
    own = picked.get("attention_backend")
    return str(own) if own else None


def _derived(kb: KB, p: Pinset, rule: ModelRule, cc: str) -> bool:
    """Whether `inv kb.refresh` judged this model's architecture with the pin set's sglang on this GPU."""
    if not rule.model or not rule.model.architectures:
        return False
    return kb.sglang_pick(p.id, rule.model.architectures[0], cc, rule.model.model_type,
                            rule.model.quantization_form) is not None


def _sglang_rejects(kb: KB, p: Pinset, rule: ModelRule, cc: str) -> dict[str, str]:
    if not rule.model or not rule.model.architectures:
        return {}
    said = kb.sglang_pick(p.id, rule.model.architectures[0], cc, rule.model.model_type,
                            rule.model.quantization_form) or {}
    return dict(said.get("rejects") or {})


def _architecture(rule: ModelRule) -> str:
    return rule.model.architectures[0] if rule.model and rule.model.architectures else rule.label


def _holds(arch: Arch, backend: str, version: str, rule: ModelRule) -> bool:
    """SGLang's own pick stands unless a rule of gpus.yml says it fails here, or warns about it naming this
    model's architecture (a warning is a caveat to the user's choice: only where its source saw this
    architecture fail does it overrule SGLang). A backend the rows do not list (dsa, flashmla, trtllm_mla:
    SGLang's per-model choices) is SGLang's business."""
    if backend in arch.attention_forbidden:
        return False
    verdict = attention.judge(arch, backend, version, rule.hybrid)
    if verdict.level == "warn":
        warned = arch.attention_warn.get(backend)
        return not (warned and _architecture(rule) in warned.architectures)
    return verdict.level == "ok" or (backend not in arch.attention_allowed and not rule.hybrid)


def _mm_attention(kb: KB, p: Pinset, arch: Arch, rule: ModelRule, fact: str, trail: Trail) -> list[str]:
    args: list[str] = []
    if arch.mm_attention and rule.family and rule.family.multimodal:
        args += [flag(kb, "mm_attention_backend", p.engine, p.version), arch.mm_attention]
        trail.decide("vision attention backend", arch.mm_attention,
                     f"the cookbook's choice for the vision tower on compute capability {arch.cc}",
                     fact=fact, rule=arch.where, source=arch.source)
    elif rule.family and rule.family.multimodal and p.engine == "sglang":
        trail.decide("vision attention backend", "engine default (triton_attn)",
                     f"no vision backend is passed on compute capability {arch.cc}: sglang picks triton_attn "
                     "itself there (fa3 is Hopper-only, fa4 Blackwell data-centre only)",
                     fact=fact, rule=arch.where, source="sglang srt/layers/attention/vision.py (0.5.23)")
    return args


def family_attention(rule: ModelRule, cc: str, version: str) -> FamilyAttention | None:
    """The family's own attention row for this architecture and engine version, if it has one."""
    if not rule.family:
        return None
    return next((a for a in rule.family.attention if cc in a.cc and versions.matches(version, a.engine)), None)


def _family_extra(rule: ModelRule, p: Pinset, gpus: GpuSet | None, trail: Trail) -> list[str]:
    if not rule.family or not rule.model:
        return []
    ctx = {"engine": p.engine, "architectures": list(rule.model.architectures),
           "quantization": rule.model.quantization or "none",
           "cc": gpus.arch.cc if gpus else None, "cc_major": gpus.arch.cc_major if gpus else None}
    out: list[str] = []
    for x in rule.family.extra_args:
        if conditions.holds(x.when, ctx):
            out += list(x.args)
            trail.decide("extra model args", " ".join(x.args), "the family rule's condition holds",
                         fact=conditions.describe(x.when, ctx), rule=rule.family.where, source=x.source)
    return out
