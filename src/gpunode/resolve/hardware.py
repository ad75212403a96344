"""Which GPUs the plan uses and which architecture row describes them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpunode.errors import ResolveError
from gpunode.facts.types import Facts, Gpu
from gpunode.resolve import kernels, mig, products
from gpunode.resolve.choices import Choices
from gpunode.resolve.kb import KB, Arch
from gpunode.resolve.products import Product
from gpunode.resolve.trail import Trail

MEMORY_QUERY = "nvidia-smi --query-gpu=index,name,memory.total,compute_cap,driver_version --format=csv"


@dataclass(frozen=True)
class GpuSet:
    gpus: tuple[Gpu, ...]
    arch: Arch
    memory_mib: int | None          # the smallest of the selected GPUs; None when unknown
    # Where memory_mib came from when the facts had none: the product table's row for the name, or
    # (floor=True) the smallest card of this compute capability in that table.
    memory_from: Product | None = None
    memory_floor: bool = False
    host_arch: Product | None = None  # the product whose systems fix the host's CPU architecture
    mig: tuple[mig.Instance, ...] = ()   # MIG on: the devices that each run a server (memory_mib: the smallest)

    @property
    def indexes(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.gpus)


def cc_of(gpu: Gpu, kb: KB) -> tuple[str | None, str]:
    """The GPU's compute capability and where it came from."""
    if gpu.compute_cap:
        return gpu.compute_cap, f"gpu{gpu.index}.compute_cap={gpu.compute_cap} ({gpu.compute_cap_source or 'facts'})"
    for arch in kb.archs:
        for pattern in arch.products:
            if re.search(pattern, gpu.name, re.IGNORECASE):
                return arch.cc, f"gpu{gpu.index}.name={gpu.name!r} matches {pattern!r} in gpus.yml"
    return None, f"gpu{gpu.index}.name={gpu.name!r}, no compute capability"


def select(facts: Facts, choices: Choices, kb: KB, trail: Trail) -> GpuSet | None:
    """The GPUs to serve on, or None for a machine without GPUs."""
    if not facts.gpus:
        return None
    gpus = facts.gpus
    if choices.gpus is not None:
        have = {g.index for g in facts.gpus}
        missing = [i for i in choices.gpus if i not in have]
        if missing:
            raise ResolveError(f"gpus: {list(choices.gpus)} names GPU {missing} but the target has GPUs "
                               f"{sorted(have)}", target=facts.target, hint="fix the gpus variable")
        gpus = tuple(g for g in facts.gpus if g.index in choices.gpus)
    found: dict[str, list[tuple[Gpu, str]]] = {}
    for gpu in gpus:
        cc, fact = cc_of(gpu, kb)
        if cc is None:
            cut = gpu.name.endswith("...")
            raise ResolveError(
                f"GPU {gpu.index} ({gpu.name}) is unknown: nvidia-smi gave no compute capability and no product "
                f"pattern in gpus.yml matches its name" + (" (the table cut it short)" if cut else ""),
                target=facts.target, evidence=fact,
                hint=(f"give `nvidia-smi -q` or `{MEMORY_QUERY}` from the node instead: they print the whole name "
                      "(and the query the compute capability)") if cut else
                "add the GPU's compute capability and name pattern to gpunode/compat/gpus.yml, "
                "or leave it out with the gpus variable")
        found.setdefault(cc, []).append((gpu, fact))
    if len(found) > 1:
        listing = "; ".join(f"CC {cc}: GPUs {[g.index for g, _ in rows]}" for cc, rows in sorted(found.items()))
        raise ResolveError(f"the GPUs have different architectures ({listing}); one plan serves one architecture",
                           target=facts.target,
                           hint="choose GPUs of one kind with the gpus variable, e.g. gpus: [0, 1]")
    cc, rows = next(iter(found.items()))
    arch = kb.arch(cc)
    if arch is None:
        first = rows[0][0]
        none = kernels.none_serve(kb, cc, f"GPU {first.index} ({first.name})")
        if none:
            message, hint, evidence = none
            raise ResolveError(message, target=facts.target, evidence=f"{rows[0][1]}\n{evidence}", hint=hint)
        known = ", ".join(a.cc for a in kb.archs)
        machine = facts.system.arch or next((p.host for p in map(products.lookup, [first.name]) if p and p.host), "")
        served = [(p, m) for p, m in kernels.serving(kb, cc) if not machine or m == machine]
        code = "; ".join(kernels.describe(p, m) + f" [pin set {p.id}]" for p, m in served)
        engines = sorted({p.engine for p, _ in served})
        lacking = sorted({p.engine for p in kb.pinsets if p.gpu_code} - set(engines))
        without = f" ({', '.join(lacking)}: no pinned wheel has code for {kernels.sm(cc)})" if lacking else ""
        raise ResolveError(
            f"GPU {first.index} ({first.name}) has compute capability {cc}, which no row in gpus.yml "
            f"describes (known: {known})", target=facts.target,
            evidence=f"{rows[0][1]}\nwheels with code for it: {code}",
            hint=f"only {', '.join(engines)} can run on it{without}: add an architecture row for {cc} to "
                 f"gpunode/compat/gpus.yml with its sources and set engine: {engines[0]}, or use other GPUs")
    selected = tuple(g for g, _ in rows)
    names = sorted({g.name for g in selected})
    trail.decide("gpu architecture", f"{cc} {arch.name}",
                 f"{len(selected)} GPU(s) ({', '.join(names)}) have compute capability {cc}",
                 fact="; ".join(f for _, f in rows[:2]) + (" ..." if len(rows) > 2 else ""),
                 rule=arch.where, source=arch.source)
    hosts = {p.host for p in map(products.lookup, names) if p}
    host = next((p for p in map(products.lookup, names) if p and p.host), None) if len(hosts) == 1 else None
    instances = mig.instances(facts, selected, trail)
    if instances:
        return GpuSet(selected, arch, min(i.device.memory_mib or 0 for i in instances), None, False, host, instances)
    memory, made, floor = _memory(selected, cc, trail)
    return GpuSet(selected, arch, memory, made, floor, host)


def _memory(selected: tuple[Gpu, ...], cc: str, trail: Trail) -> tuple[int | None, Product | None, bool]:
    """The memory of the smallest selected GPU: from the facts, else from the product table by name,
    else the smallest card of this compute capability in that table (floor=True)."""
    if all(g.memory_mib for g in selected):
        return min(g.memory_mib for g in selected if g.memory_mib), None, False
    each: list[tuple[int, Product | None]] = []
    for g in selected:
        p = None if g.memory_mib else products.lookup(g.name)
        if g.memory_mib:
            each.append((g.memory_mib, None))
        elif p is not None:
            each.append((p.memory_mib, p))
    if len(each) == len(selected):
        mem, _ = min(each, key=lambda x: x[0])
        named = next(p for _, p in each if p)
        trail.decide("gpu memory", f"{mem} MiB", f"the report shows no memory; {named.key} has {named.memory_gb} GB "
                     f"(NVIDIA's figure, taken as {named.memory_gb} x 10^9 bytes, below what nvidia-smi shows)",
                     fact=f"gpu name {selected[0].name!r} matches {named.key!r}", rule=products.WHERE,
                     source=named.source)
        if named.unified:
            trail.warn(f"{named.key}'s {named.memory_gb} GB is shared with the CPU: the servers' processes, "
                       "/dev/shm and the OS use the same memory as the weights")
        return mem, named, False
    least = products.smallest(cc)
    if least is None:
        return None, None, False
    trail.warn(f"GPU memory unknown ({selected[0].name} is not in {products.WHERE}); only a model that fits the "
               f"smallest card of compute capability {cc} ({least.key}, {least.memory_gb} GB) is planned")
    return least.memory_mib, least, True
