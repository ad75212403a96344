"""Which fixes of fixes.yml apply, with their placeholders filled in."""

from __future__ import annotations

import re
from typing import Any

from gpunode.errors import ResolveError
from gpunode.facts.types import Facts
from gpunode.resolve import actions, conditions, versions
from gpunode.resolve.hardware import GpuSet
from gpunode.resolve.kb import KB, Pinset
from gpunode.resolve.models import ModelRule
from gpunode.resolve.plan import PlannedFix, Toolkit
from gpunode.resolve.toolkit import site_packages
from gpunode.resolve.trail import Trail, short

_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def toolkit_cccl(p: Pinset, toolkit: Toolkit, kb: KB) -> str | None:
    """The CCCL version the JIT toolkit's own headers have (None: no CCCL headers at all)."""
    if toolkit.kind == "pip":
        return p.pip_cccl
    row = kb.toolkit_cccl.get(toolkit.nvcc or "")
    return row.cccl if row else None


def cccl_behind(p: Pinset, toolkit: Toolkit, kb: KB) -> bool | None:
    """flashinfer vendors a newer CCCL than the JIT toolkit has (docs/sources.md#cccl-headers)."""
    if not (p.flashinfer and p.flashinfer.vendored_cccl and toolkit.kind):
        return False
    have = toolkit_cccl(p, toolkit, kb)
    if have is None and toolkit.kind == "system" and (toolkit.nvcc or "") not in kb.toolkit_cccl:
        return None
    return have is None or versions.parse(have) < versions.parse(p.flashinfer.vendored_cccl)


def context(facts: Facts, gpus: GpuSet | None, p: Pinset, toolkit: Toolkit, rule: ModelRule, venv: str,
            tp: int, mtp: bool, kb: KB) -> dict[str, Any]:
    """The facts the `when:` keys look at (see conditions.KEYS)."""
    inst = facts.install
    ours = bool(inst.venv) and inst.venv.rstrip("/") == venv.rstrip("/")
    model = rule.model
    drv, lib = facts.driver.version, facts.system.libcuda_version
    return {
        "engine": p.engine,
        "gpu": gpus is not None,
        "cc": gpus.arch.cc if gpus else None,
        "cc_major": gpus.arch.cc_major if gpus else None,
        "architectures": list(model.architectures) if model else None,
        "quantization": (model.quantization or "none") if model else None,
        "in_container": facts.system.in_container,
        "jit_toolkit": toolkit.kind,
        "torch_cuda_major": p.torch_cuda.split(".")[0] if p.torch_cuda else None,
        "cccl_behind": cccl_behind(p, toolkit, kb),
        "kernel_links_libnuma": p.kernel_links_libnuma,
        "libnuma": facts.system.libnuma,
        "other_kernel_installed": ours and bool(inst.kernel_package and p.kernel_package
                                                and inst.kernel_package != p.kernel_package),
        "flashinfer_changes": ours and bool(inst.flashinfer and p.flashinfer
                                            and inst.flashinfer != p.flashinfer.version),
        "ptxas_fix": gpus.arch.ptxas_fix if gpus else False,
        "driver_lib_mismatch": (drv != lib) if drv and lib else None,
        "tp": tp > 1,
        "mtp": mtp,
    }


def values(facts: Facts, p: Pinset, toolkit: Toolkit, venv: str, python: str, kb: KB,
           jit_cache: str = "/var/cache/gpunode/jit") -> dict[str, Any]:
    """What `{name}` placeholders in fixes.yml stand for."""
    return {
        "venv": venv,
        "jit_cache": jit_cache,
        "python": python,
        "site_packages": site_packages(venv, python),
        "cuda_home": toolkit.cuda_home,
        "torch_cuda": p.torch_cuda,
        "cuda_major": p.torch_cuda.split(".")[0] if p.torch_cuda else None,
        "nvcc_packages": list(kb.nvcc[p.torch_cuda].packages) if p.torch_cuda else None,
        "other_kernel": [facts.install.kernel_package] if facts.install.kernel_package else None,
        "uninstall_after": list(p.uninstall_after),
    }


def _fill(value: Any, names: dict[str, Any], fix_id: str) -> Any:
    if isinstance(value, dict):
        return {k: _fill(v, names, fix_id) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, names, fix_id) for v in value]
    if not isinstance(value, str):
        return value
    whole = _PLACEHOLDER.fullmatch(value)
    wanted = [whole.group(1)] if whole else _PLACEHOLDER.findall(value)
    for name in wanted:
        if names.get(name) is None:
            raise ResolveError(f"fix {fix_id} applies but {{{name}}} has no value in this plan",
                               hint=f"narrow the fix's `when:` in fixes.yml so it only applies where {name} is known")
    if whole:
        return names[whole.group(1)]
    return _PLACEHOLDER.sub(lambda m: str(names[m.group(1)]), value)


def plan_fixes(kb: KB, ctx: dict[str, Any], names: dict[str, Any], trail: Trail) -> tuple[list[PlannedFix],
                                                                                         dict[str, str]]:
    """The fixes whose conditions hold, and the environment variables they set."""
    out: list[PlannedFix] = []
    env: dict[str, str] = {}
    for rule in kb.fixes:
        if not conditions.holds(rule.when, ctx):
            continue
        acts = tuple(actions.make(a.kind, _fill(a.params, names, rule.id)) for a in rule.actions)
        fact = conditions.describe(rule.when, ctx)
        out.append(PlannedFix(rule.id, rule.phase, acts, rule.reason, fact, rule.source, short(rule.where)))
        for a in acts:
            if isinstance(a, actions.SetEnv):
                env.update(a.vars)
            if isinstance(a, actions.Manual):
                trail.warn(f"fix {rule.id} needs a person: {a.message}")
        trail.decide("fix", rule.id, rule.reason, fact=fact, rule=rule.where, source=rule.source)
    return out, env
