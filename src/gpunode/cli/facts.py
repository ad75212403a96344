"""inv facts: probe a target in one round trip and show what gpunode knows about it.

    inv facts --host kpro6 --ct 200                 # probe the container
    inv facts --host kpro6 --ct 200 --save snap/    # ... and keep the raw outputs
    inv facts --facts snap/ --json                  # replay a saved snapshot offline
    inv facts --local --model /dev/shm/Qwen3.6-27B  # probe this machine
"""

from __future__ import annotations

import dataclasses
import json as jsonlib
from pathlib import Path
from typing import TYPE_CHECKING

from gpunode.cli.common import load_inventory, parse_sets, select_targets, task
from gpunode.errors import InventoryError, printable

if TYPE_CHECKING:  # the task imports what it runs: `inv --list` stays fast
    from gpunode.facts.snapshot import RawFacts
    from gpunode.facts.types import Facts
    from gpunode.transport.base import Transport

HELP = {
    "host": "inventory host to probe",
    "ct": "container vmid on that host (omit for the host itself or a plain SSH host)",
    "local": "probe this machine instead of an inventory target",
    "model": "model directory to inspect (default: the target's model_source)",
    "venv": "venv to inspect (default: the target's venv)",
    "save": "also write the raw outputs to this folder (a snapshot for --facts)",
    "facts": "read a saved snapshot folder instead of probing",
    "json": "print the facts as JSON",
    "inventory": "inventory folder or file (default: $GPUNODE_INVENTORY, gpunode.yaml's inventory:, ./inventory)",
    "set": "override a variable: -e key=value, or -e @vars.yml (a YAML file of them); repeatable",
}


def facts_for(transport: Transport, model_path: str | None = None,
              venv: str | None = None) -> tuple[RawFacts, Facts]:
    """Probe once and parse: the raw outputs (to save) and the facts."""
    from gpunode.facts.parse import parse
    from gpunode.facts.probe import gather

    raw = gather(transport, model_path=model_path, venv=venv)
    return raw, parse(raw)


@task(iterable=["set_"], help=HELP)
def facts(c, host=None, ct=None, local=False, model=None, venv=None, save=None, facts=None, json=False,
          inventory=None, set_=None):
    """Show the facts of a target: GPUs, driver, system, CUDA, an existing venv, a model directory."""
    from gpunode.cli.session import Session
    from gpunode.facts import snapshot
    from gpunode.facts.parse import parse
    from gpunode.transport.local import LocalTransport

    if facts:
        raw = snapshot.load(Path(facts))
        result = parse(raw)
    elif local:
        raw, result = facts_for(LocalTransport(), model, venv)
    else:
        if not host:
            raise InventoryError("which target? pass --host H (and --ct N), --local, or --facts DIR",
                                 hint="`inv facts --local` probes this machine")
        (target,) = select_targets(load_inventory(inventory), host, ct, None, parse_sets(set_))
        with Session() as session:
            raw, result = facts_for(session.transport(target), model or target.vars.get("model_source"),
                                    venv or target.vars.get("venv"))
    if save:
        snapshot.save(raw, Path(save))
    print(jsonlib.dumps(dataclasses.asdict(result), indent=2) if json else printable(render_facts(result, raw)))


def render_facts(f: Facts, raw: RawFacts | None = None) -> str:
    """The facts as a short human report, problems last."""
    took = f" (probed in {raw.duration_s:.2f} s)" if raw is not None and raw.duration_s is not None else ""
    lines = [f"target      {f.target}{took}"]
    if f.gpus:
        for g in f.gpus:
            mem = f"{g.memory_mib} MiB" if g.memory_mib is not None else "memory not reported"
            cc = f"CC {g.compute_cap} ({g.compute_cap_source})" if g.compute_cap else "CC unknown"
            mig = f", MIG {g.mig_mode}" if g.mig_mode else ""
            lines.append(f"gpu {g.index:<7} {g.name}, {mem}, {cc}, {g.pci_bus_id}{mig}")
            for dev in g.mig_devices:
                dmem = f"{dev.memory_mib} MiB" if dev.memory_mib is not None else "memory not reported"
                lines.append(f"  mig {dev.index:<5} {dev.profile or 'profile not reported'}, {dmem}, "
                             f"{dev.uuid or 'UUID not reported (nvidia-smi -L shows it)'}")
    else:
        lines.append("gpus        none found")
    d, s = f.driver, f.system
    user = ""
    if s.libcuda_version:
        user = f"; libcuda.so.{s.libcuda_version}" + (" matches" if s.libcuda_version == d.version else
                                                       " DOES NOT MATCH")
    lines.append(f"driver      {d.version or '-'}, CUDA {d.cuda or '-'}{user}")
    pythons = " ".join(s.pythons) or "-"
    lines.append(f"system      {s.os_id} {s.os_version} {s.arch}, glibc {s.glibc or '-'}, "
                 f"python3 {s.default_python or '-'} (found: {pythons}), {s.cpus} CPUs"
                 + (", in a container" if s.in_container else "") + (", systemd" if s.systemd else ""))
    limit = _size(s.mem_limit_bytes) if s.mem_limit_bytes else "none"
    lines.append(f"memory      {_size(s.mem_total_bytes)} (cgroup limit {limit}), /dev/shm {_size(s.shm_size_bytes)}"
                 f" ({_size(s.shm_free_bytes)} free), {_size(s.venv_root_free_bytes)} free where venvs go")
    lines.append(f"libraries   libcuda.so.1 {_yes(s.libcuda)}, libnuma.so.1 {_yes(s.libnuma)}")
    toolkits = ", ".join(f"{t.version} at {t.path} ({t.kind})" for t in s.toolkits) or "none"
    lines.append(f"cuda        {toolkits}")
    i = f.install
    if i.venv:
        kernel = f"{i.kernel_package} {i.kernel_version}" if i.kernel_package else "-"
        lines.append(f"venv        {i.venv}: python {i.python or '-'}, torch {i.torch or '-'} "
                     f"(CUDA {i.torch_cuda or '-'}), sglang {i.sglang or '-'}, kernel {kernel}, "
                     f"flashinfer {i.flashinfer or '-'}, vllm {i.vllm or '-'}")
    m = f.model
    if m is not None:
        if not m.exists:
            lines.append(f"model       {m.path}: not found")
        else:
            missing = f", MISSING {', '.join(m.missing_shards)}" if m.missing_shards else ""
            lines.append(f"model       {m.path}: {', '.join(m.architectures) or '?'} ({m.model_type}"
                         + (f"/{m.text_model_type}" if m.text_model_type else "") + f"), {m.dtype or '?'}, "
                         f"{m.quantization or 'not quantized'}, {_size(m.size_bytes)} in {len(m.shards)} "
                         f"shard(s){missing}; hybrid linear attention {_yes(m.hybrid_linear_attention)}; "
                         f"MTP config {_yes(m.mtp_config)}, MTP weights {_yes(m.mtp_weights)}")
    lines += [f"problem     {p}" for p in f.problems]
    return "\n".join(lines)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _size(n: int | None) -> str:
    if not n:
        return "0"
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


ns = facts
