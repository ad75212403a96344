"""The GPU part of onboarding: host facts -> devN entries or classic lxc.* lines.

Run once per onboard over the host's SSH connection (one probe round trip). A host without
a loaded NVIDIA driver is refused here, before the API is touched: nothing is half-made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpunode.errors import PveError
from gpunode.pve import classic, devices, hostfacts

PVE_CONF_DIR = "/etc/pve/lxc"  # pmxcfs; the PVE tools write it as temp file + rename, as we do


@dataclass
class GpuPlan:
    facts: hostfacts.HostFacts
    gpus: list[int]
    nodes: list[str]                                     # /dev paths passed through
    devn: list[str] = field(default_factory=list)        # devN values (host paths)
    classic: list[str] = field(default_factory=list)     # lxc.* lines when devN is not available

    def lines(self) -> list[str]:
        out = self.facts.lines()
        if self.classic:
            out += ["classic passthrough lines for the CT config:"] + [f"  {line}" for line in self.classic]
        return out


def gather(host_transport: Any, root: str = "") -> hostfacts.HostFacts:
    result = host_transport.script(hostfacts.PROBE, *hostfacts.probe_args(root),
                                   what="reading the host's Proxmox and NVIDIA facts")
    return hostfacts.parse(result.stdout, root)


def plan(facts: hostfacts.HostFacts, gpus: list[int], host: str) -> GpuPlan:
    """The passthrough for these GPUs; PveError naming what is missing on the host."""
    try:
        nodes = devices.passthrough(facts.nodes, gpus, host=host)
    except PveError as exc:
        if facts.driver is None:
            raise PveError(f"the NVIDIA driver is absent on host {host} (no /proc/driver/nvidia/version): "
                           f"{exc.message}", evidence=exc.evidence, target=host,
                           hint="install the driver on the Proxmox host first (NVIDIA's .run or the "
                           "distribution's packages), check `nvidia-smi` there, then run onboard again") from None
        raise
    if facts.driver is None:
        raise PveError(f"the NVIDIA driver is absent on host {host}: /proc/driver/nvidia/version does not exist "
                       "although /dev/nvidia* nodes do (stale nodes of an unloaded module?)", target=host,
                       hint="load the driver on the host (`nvidia-smi` there must work), then run onboard again")
    out = GpuPlan(facts, gpus, nodes)
    if facts.devn:
        out.devn = [facts.host_path(p) for p in nodes]
    else:
        out.classic = classic.lines(facts, nodes, host=host)
    return out


def apply_classic(host_transport: Any, vmid: int, wanted: list[str], facts: hostfacts.HostFacts,
                  conf_dir: str = PVE_CONF_DIR) -> classic.Merge:
    """Write the classic lines into the CT's config over SSH (the API cannot set lxc.* keys)."""
    path = f"{conf_dir.rstrip('/')}/{vmid}.conf"
    text = host_transport.read_file(path).decode()
    merged = classic.merge(text, wanted, facts)
    if merged.changed:
        host_transport.write_file(path, merged.text.encode(), mode=0o640)
    return merged
