"""How many servers, on which GPUs (or CPU cores), with which tensor parallelism.

One server per GPU by default; tensor parallelism only when the weights do not
fit one GPU (or the user forces `tp:`), in groups of consecutive GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.errors import ResolveError
from gpunode.facts.types import Facts
from gpunode.resolve import mig
from gpunode.resolve.choices import Choices
from gpunode.resolve.hardware import MEMORY_QUERY, GpuSet
from gpunode.resolve.kb import KB
from gpunode.resolve.models import ModelRule
from gpunode.resolve.plan import Topology
from gpunode.resolve.trail import Trail

GIB = 1 << 30


class DoesNotFit(ResolveError):
    """The weights do not fit the target's GPUs: a multi-node group may still hold them (resolve/multinode.py)."""


def gpu_topology(facts: Facts, gpus: GpuSet, rule: ModelRule, mem_fraction: float, choices: Choices, kb: KB,
                 trail: Trail, nodes: Nodes | None = None) -> tuple[Topology, list[tuple[int, ...]]]:
    if nodes is not None:
        if gpus.mig:
            raise ResolveError(f"a multi-node server cannot run on MIG devices: {mig.WHY_NO_TP}", target=facts.target,
                               hint="leave this target out of the multinode group, or turn MIG off on its GPUs")
        return _multi_node(facts, gpus, rule, mem_fraction, kb, trail, nodes)
    if gpus.mig:
        return _mig(facts, gpus, rule, mem_fraction, choices, kb, trail)
    n = len(gpus.gpus)
    arch = gpus.arch
    size = rule.model.size_bytes if rule.model else 0
    mem = gpus.memory_mib * (1 << 20) if gpus.memory_mib else None
    usable = mem * mem_fraction * (1 - kv_reserve(kb)) if mem else None
    fit = f"weights {size} bytes; GPU memory {gpus.memory_mib} MiB"
    if mem and usable and size:
        fit = (f"weights {size / GIB:.1f} GiB; {n} GPU(s) of {mem / GIB:.1f} GiB; mem_fraction {mem_fraction}; "
               f"{kv_reserve(kb):.0%} of the pool kept for KV cache -> {usable / GIB:.1f} GiB for weights per GPU")
    # tp set by the inventory: each GPU holds a tp-th of the weights (checked against the floor too)
    if size and (usable is None or (gpus.memory_floor and size / (choices.tp or 1) > usable)):
        raise ResolveError(_unknown_memory(gpus, rule.label, size, usable), target=facts.target,
                           hint=f"run `{MEMORY_QUERY}` on the node and give that output instead "
                                "(or plain `nvidia-smi`): it shows each GPU's memory")
    if choices.tp:
        tp = choices.tp
        if tp > n:
            raise ResolveError(f"tp: {tp} but only {n} GPU(s) are selected", target=facts.target,
                               hint="lower tp or select more GPUs with the gpus variable")
        if usable and size and size / tp > usable:
            raise ResolveError(f"tp: {tp} does not fit the model: {fit}", target=facts.target,
                               hint=f"raise tp (up to {n}) or lower the model's size (a quantized checkpoint)")
        why = f"tp: {tp} set by the inventory"
        if not size:
            why += f"; {_no_size(rule)}, so whether it fits was not checked: the inventory's decision"
    elif not size and rule.model and rule.model.size_source.startswith("unknown size"):
        # a guess could be far too small (a 99 GB model planned on one 80 GB GPU): ask instead
        raise ResolveError(f"{rule.label}: {rule.model.size_source}", target=facts.target,
                           hint="stage the weights (their files give the size), put the model's "
                                "model.safetensors.index.json beside config.json (its metadata.total_size), "
                                "or set tp: to the tensor-parallel size the model needs")
    elif not size:
        # no plan assumes a fit (issue 28): one server per GPU could be a 1 TB model on a 24 GB card
        raise ResolveError(f"{_no_size(rule)}, so the plan cannot tell how many GPUs one server needs",
                           target=facts.target, hint=NO_SIZE_HINT)
    elif usable is not None and size <= usable:   # usable is known here: refused above otherwise
        tp = 1
        why = "the weights fit one GPU, so each GPU runs its own server (data parallelism, no NCCL)"
    else:
        tp = next((t for t in (2, 4, 8, 16) if t <= n and usable and size / t <= usable), 0)
        if not tp:
            raise DoesNotFit(f"{rule.label} does not fit on {n} GPU(s): {fit}", target=facts.target,
                             hint="use more or larger GPUs, a lower-precision checkpoint, or a higher mem_fraction; "
                                  "or serve it across several nodes: put them in one inventory group with "
                                  "multinode: true (docs/multinode.md)")
        why = f"the weights do not fit one GPU; the smallest tensor-parallel group that fits is {tp}"
    if tp > 1 and arch.tp_allowed == "no":
        raise ResolveError(f"tensor parallelism {tp} on compute capability {arch.cc}: {arch.tp_caveat}",
                           target=facts.target, hint="use a model that fits one GPU")
    if tp > 1 and arch.tp_allowed == "fragile":
        trail.warn(f"tensor parallelism on compute capability {arch.cc} is fragile: {arch.tp_caveat}")
    indexes = gpus.indexes
    groups = [indexes[i:i + tp] for i in range(0, n - n % tp, tp)]
    unused = indexes[len(groups) * tp:]
    if unused:
        trail.warn(f"GPUs {list(unused)} are left unused: {n} GPUs do not split into groups of {tp}")
    kind = "per-gpu" if tp == 1 else "tensor-parallel"
    trail.decide("topology", f"{len(groups)} server(s) x tp {tp} ({kind})", why, fact=fit,
                 rule="compat/gpus.yml topology", source=kb.topology_source)
    return Topology(kind, len(groups), tp, indexes, tuple(unused)), groups


def _mig(facts: Facts, gpus: GpuSet, rule: ModelRule, mem_fraction: float, choices: Choices, kb: KB,
         trail: Trail) -> tuple[Topology, list[tuple[int, ...]]]:
    """One server per MIG device (groups hold positions in gpus.mig); no tensor parallelism across devices."""
    n = len(gpus.mig)
    size = rule.model.size_bytes if rule.model else 0
    mem = (gpus.memory_mib or 0) * (1 << 20)
    usable = mem * mem_fraction * (1 - kv_reserve(kb))
    fit = (f"weights {size / GIB:.1f} GiB; {n} MIG device(s), the smallest {mem / GIB:.1f} GiB; mem_fraction "
           f"{mem_fraction}; {kv_reserve(kb):.0%} of the pool kept for KV cache -> {usable / GIB:.1f} GiB for weights "
           "per device")
    if choices.tp and choices.tp > 1:
        raise ResolveError(f"tp: {choices.tp} across MIG devices: {mig.WHY_NO_TP}", target=facts.target,
                           hint="set tp: 1 (one server per MIG device), or turn MIG off to run tensor parallelism "
                                "over whole GPUs")
    if not size and not choices.tp:
        raise ResolveError(f"{_no_size(rule)}, so the plan cannot tell whether it fits one MIG device",
                           target=facts.target, hint=NO_SIZE_HINT)
    if size > usable:
        raise DoesNotFit(f"{rule.label} does not fit one MIG device, and tensor parallelism across MIG devices is "
                         f"not possible ({mig.WHY_NO_TP}): {fit}", target=facts.target,
                         hint="make larger MIG devices (a profile with more memory, e.g. one 7g instance), turn MIG "
                              "off, or use a smaller checkpoint")
    why = ("MIG is enabled: each MIG device runs its own server" +
           (f"; {_no_size(rule)}: tp: 1 set by the inventory" if not size else ""))
    trail.decide("topology", f"{n} server(s) x tp 1 (mig)", why, fact=fit, rule="resolve/mig.py", source=mig.SOURCE)
    return Topology("mig", n, 1, gpus.indexes), [(k,) for k in range(n)]


def _multi_node(facts: Facts, gpus: GpuSet, rule: ModelRule, mem_fraction: float, kb: KB, trail: Trail,
                nodes: Nodes) -> tuple[Topology, list[tuple[int, ...]]]:
    """One server per node over all its GPUs: tensor parallelism over every GPU of every node, or (pp) over
    each node's GPUs with one pipeline stage per node. Each GPU holds a 1/(tp*pp) share of the weights."""
    n = len(gpus.gpus)
    total = n * nodes.nnodes
    size = rule.model.size_bytes if rule.model else 0
    mem = gpus.memory_mib * (1 << 20) if gpus.memory_mib else None
    usable = mem * mem_fraction * (1 - kv_reserve(kb)) if mem else None
    if not size or not mem or not usable:
        raise ResolveError(f"{rule.label}: a multi-node plan needs the model's size and the GPU memory, and "
                           f"{'the size' if not size else 'the GPU memory'} is unknown", target=facts.target,
                           hint="stage the weights (or put model.safetensors.index.json beside config.json) and "
                                "give the node's nvidia-smi output with memory")
    fit = (f"weights {size / GIB:.1f} GiB; {nodes.nnodes} nodes x {n} GPU(s) of {mem / GIB:.1f} GiB; mem_fraction "
           f"{mem_fraction}; {kv_reserve(kb):.0%} of the pool kept for KV cache -> {usable / GIB:.1f} GiB for weights "
           f"per GPU, {usable * total / GIB:.0f} GiB over {total} GPUs")
    if size / total > usable:
        raise ResolveError(f"{rule.label} does not fit on {nodes.nnodes} nodes either: {fit}", target=facts.target,
                           hint="add nodes to the group, use a lower-precision checkpoint, or a higher mem_fraction")
    if total & (total - 1) or n & (n - 1):
        trail.warn(f"{total} GPUs in all ({n} per node): tensor parallelism wants a power of two dividing the "
                   "model's attention heads; sglang refuses a size that does not divide them")
    pp = nodes.nnodes if nodes.pipeline else 1
    tp = total // pp
    if tp > 1 and gpus.arch.tp_allowed == "no":
        raise ResolveError(f"tensor parallelism {tp} on compute capability {gpus.arch.cc}: {gpus.arch.tp_caveat}",
                           target=facts.target, hint="use a model that fits one GPU")
    how = (f"tp {tp} over every GPU of every node" if pp == 1 else
           f"tp {tp} inside each node, pp {pp} (one pipeline stage per node)")
    trail.decide("topology", f"1 server over {nodes.nnodes} nodes x {n} GPUs: {how} (multi-node, rank "
                 f"{nodes.rank})", f"the weights ({size / GIB:.1f} GiB) do not fit one node's {n} GPUs; the "
                 f"group's {total} GPUs hold them", fact=fit, rule="multinode: true (group variable)",
                 source="https://docs.sglang.ai/references/multi_node_deployment/multi_node.html; "
                        "sglang server_args.py --nnodes/--node-rank/--dist-init-addr")
    topo = Topology("multi-node", 1, tp, gpus.indexes, (), nodes.nnodes, nodes.rank, pp)
    return topo, [gpus.indexes]


@dataclass(frozen=True)
class Nodes:
    """This target's place in a multi-node server (resolve/multinode.py makes one per node)."""

    nnodes: int
    rank: int
    head: str              # the address every node reaches the head by
    port: int              # --dist-init-addr's port: torch.distributed's TCP store on the head
    pipeline: bool = False


NO_SIZE_HINT = ("point model_source at the model's folder (its config.json and model.safetensors.index.json give "
                "the size; with --nvidia-smi, pass --model FOLDER), or set tp: to the tensor-parallel size the "
                "model needs (tp: 1 when the weights fit one GPU)")


def _no_size(rule: ModelRule) -> str:
    m = rule.model
    if m is None:
        return "the model's size is unknown: the facts hold no model folder to read it from"
    if not m.exists:
        return f"the model's size is unknown: its folder {m.path} does not exist yet"
    return f"the size of {rule.label} is unknown ({m.size_source or 'no weights, index or config tell it'})"


def _unknown_memory(gpus: GpuSet, label: str, size: int, usable: float | None) -> str:
    name = gpus.gpus[0].name
    said = f"the GPU memory is unknown: the facts show none and {name!r} is not in compat/gpu_products.yml"
    if gpus.memory_from is None or usable is None:
        return f"{said}, so whether {label} ({size / GIB:.1f} GiB of weights) fits cannot be judged"
    least = gpus.memory_from
    return (f"{said}; {label} ({size / GIB:.1f} GiB of weights) would not fit the smallest card of compute "
            f"capability {gpus.arch.cc} ({least.key}, {least.memory_gb} GB: {usable / GIB:.1f} GiB for weights), "
            "and no plan assumes a fit")


def kv_reserve(kb: KB) -> float:
    return kb.kv_reserve_fraction


def cpu_topology(facts: Facts, choices: Choices, trail: Trail) -> tuple[Topology, list[int]]:
    cpus = facts.system.cpus
    if choices.slots:
        slots = choices.slots
        why = f"slots: {slots} set by the inventory"
    elif cpus:
        slots = min(2, cpus)
        why = f"min(2, {cpus} CPUs): one vLLM CPU server per slot, each bound to its own core"
    else:
        slots = 1
        why = "the CPU count is unknown: one slot"
        trail.warn("CPU count unknown: the plan uses one CPU slot")
    cores = list(choices.slot_cores) if choices.slot_cores else list(range(slots))
    if len(cores) < slots:
        raise ResolveError(f"slots: {slots} but slot_cores lists only {cores}", target=facts.target,
                           hint="give one core id per slot, e.g. slot_cores: [0, 1]")
    cores = cores[:slots]
    if cpus and max(cores) >= cpus and not choices.slot_cores:
        trail.warn(f"core {max(cores)} is beyond the target's {cpus} CPUs")
    trail.decide("topology", f"{slots} CPU slot(s) on cores {cores} (cpu-slots)", why,
                 fact=f"system.cpus={cpus}; no GPU", rule="choices.slots",
                 source="docs/sources.md#vllm-cpu (VLLM_CPU_OMP_THREADS_BIND: one core per server)")
    bound = facts.system.memory_bound()
    if bound:
        mem = bound[0]
        if mem < slots * 2.5 * 1e9:
            trail.warn(f"{slots} vLLM CPU servers need about {slots * 2.4:.1f} GB; the target has {mem / 1e9:.1f} GB")
    return Topology("cpu-slots", slots, 1, ()), cores
