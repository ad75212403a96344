"""MIG devices (Multi-Instance GPU) in every nvidia-smi output that shows them.

Each format shows a part: `nvidia-smi -L` the profile ("1g.10gb") and the UUID CUDA needs
(CUDA_VISIBLE_DEVICES=MIG-...), the table's "MIG devices" section and `-q` (text and XML) the
GPU instance, compute instance and memory, torch's collect_env the -L lines with the UUIDs
cut out. SGLang's check_env names CUDA's devices, and CUDA names a MIG device "<GPU> MIG <profile>":
read as a MIG device (its profile only), never as a whole GPU. `merge` puts the parts of one device together by its
index on its GPU. Recorded outputs: tests/data/gpu-reports/README.md (the MIG rows) and
tests/data/nvidia-smi/a100-x2-mig.
"""

from __future__ import annotations

import re
from dataclasses import replace

from gpunode.facts.types import Gpu, MigDevice

# -L: "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)" then "  MIG 1g.10gb     Device  0: (UUID: MIG-...)";
# R450/R460 name a device MIG-GPU-<uuid>/<gi>/<ci>; collect_env prints the lines with " (UUID: ...)" removed.
_LIST_GPU = re.compile(r"^[ \t]*(?:GPU models and configuration\s*:\s*)?GPU (\d+): [^\r\n]*?"
                       r"(?:\(UUID: (GPU-[^)\s]+)\))?[ \t\r]*$")
LIST_MIG = re.compile(r"^[ \t]*MIG (\S+)\s+Device\s+(\d+):(?:\s*\(UUID: (MIG-[^)\s]+)\))?[ \t\r]*$")
# the table's "MIG devices" rows: "|  0    3   0   0  |    12MiB /  9856MiB  | ..."
_TABLE_ROW = re.compile(r"^\|\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*\|[^|]*?\d+MiB\s*/\s*(\d+)MiB")


# CUDA names a MIG device "<its GPU's name> MIG <profile>" (torch.cuda.get_device_name, and so SGLang's check_env):
# "NVIDIA H100 80GB HBM3 MIG 1g.10gb" (docs/sources.md#mig); the CUDA device number is not the GPU's index
_CUDA_NAME = re.compile(r"^(.*\S)\s+MIG\s+((?:\d+c\.)?\d+g\.\d+gb\S*)$", re.I)


def from_cuda_names(gpus: tuple[Gpu, ...]) -> tuple[Gpu, ...]:
    """CUDA devices (check_env's list) whose name says they are MIG devices, as MIG devices of a MIG-enabled
    GPU: never a whole GPU. Only the profile is known; the UUID and memory come from nvidia-smi."""
    out = []
    for g in gpus:
        m = _CUDA_NAME.match(g.name)
        if m:
            g = replace(g, name=m.group(1), mig_mode="Enabled",
                        mig_devices=(MigDevice(index=g.index, profile=m.group(2)),))
        out.append(g)
    return tuple(out)


def from_list(text: str) -> dict[int, tuple[MigDevice, ...]]:
    """{GPU index: its MIG devices} from `nvidia-smi -L` lines anywhere in text (a paste of several outputs)."""
    out: dict[int, list[MigDevice]] = {}
    gpu: int | None = None
    for line in text.splitlines():
        g = _LIST_GPU.match(line)
        if g:
            gpu = int(g.group(1))
            continue
        m = LIST_MIG.match(line)
        if m and gpu is not None:
            out.setdefault(gpu, []).append(MigDevice(index=int(m.group(2)), profile=m.group(1), uuid=m.group(3) or ""))
        elif line.strip() and not line.startswith((" ", "\t")):
            gpu = None
    return {k: tuple(v) for k, v in out.items()}


def from_table(text: str) -> dict[int, tuple[MigDevice, ...]]:
    """{GPU index: its MIG devices} from the default table's "MIG devices:" section."""
    out: dict[int, list[MigDevice]] = {}
    inside = False
    for line in text.splitlines():
        s = line.strip()
        if "MIG devices:" in s:
            inside = True
            continue
        if inside and ("Processes:" in s or not s):
            inside = False
        m = _TABLE_ROW.match(s) if inside else None
        if m:
            gpu, gi, ci, dev, total = (int(x) for x in m.groups())
            out.setdefault(gpu, []).append(MigDevice(index=dev, memory_mib=total, gpu_instance=gi, compute_instance=ci))
    return {k: tuple(v) for k, v in out.items()}


def from_q_block(lines: list[str]) -> tuple[MigDevice, ...]:
    """The MIG devices of one GPU's `nvidia-smi -q` block: "MIG Devices" / "MIG Device" sub-blocks with
    Index, GPU Instance ID, Compute Instance ID and "FB Memory Usage" / "Total"."""
    out: list[MigDevice] = []
    current: dict[str, str] | None = None
    depth = section = -1
    memory = False
    for raw in lines + ["END"]:
        indent = len(raw) - len(raw.lstrip(" "))
        key, _, value = raw.strip().partition(":")
        key, value = key.strip(), value.strip()
        if current is not None and indent <= depth:
            out.append(_q_device(current))
            current = None
        if key == "MIG Devices":
            section = indent
            continue
        if section >= 0 and indent <= section:
            section = -1
        if section >= 0 and key == "MIG Device" and not value:
            current, depth, memory = {}, indent, False
            continue
        if current is not None:
            if key == "FB Memory Usage":
                memory = True
            elif key.endswith("Memory Usage"):
                memory = False
            elif memory and key == "Total":
                current.setdefault("memory", value)
            elif key in ("Index", "GPU Instance ID", "Compute Instance ID"):
                current.setdefault(key, value)
    return tuple(out)


def _q_device(v: dict[str, str]) -> MigDevice:
    mem = re.match(r"(\d+)\s*MiB", v.get("memory", ""))
    return MigDevice(index=_int(v.get("Index")) or 0, memory_mib=int(mem.group(1)) if mem else None,
                     gpu_instance=_int(v.get("GPU Instance ID")), compute_instance=_int(v.get("Compute Instance ID")))


def from_xml_block(block: str) -> tuple[MigDevice, ...]:
    """The <mig_device> elements of one GPU's `nvidia-smi -q -x` block."""
    out = []
    for m in re.finditer(r"<mig_device>(.*?)(?:</mig_device>|$)", block, re.S):
        d = m.group(1)
        index = _int(_tag(d, "index"))
        if index is None:
            continue
        mem = re.search(r"<fb_memory_usage>\s*<total>\s*(\d+)\s*MiB", d)
        out.append(MigDevice(index=index, memory_mib=int(mem.group(1)) if mem else None,
                             gpu_instance=_int(_tag(d, "gpu_instance_id")),
                             compute_instance=_int(_tag(d, "compute_instance_id"))))
    return tuple(out)


def without_xml_devices(block: str) -> str:
    """A GPU's XML block without its <mig_devices>, whose own <fb_memory_usage> come before the GPU's."""
    return re.sub(r"<mig_devices>.*?(?:</mig_devices>|$)", "", block, flags=re.S)


def _tag(block: str, name: str) -> str | None:
    m = re.search(rf"<{name}>\s*([^<]*?)\s*</{name}>", block)
    return m.group(1) if m else None


def _int(text: str | None) -> int | None:
    return int(text) if text and text.strip().isdigit() else None


def merge(a: tuple[MigDevice, ...], b: tuple[MigDevice, ...]) -> tuple[MigDevice, ...]:
    """One GPU's MIG devices as two outputs show them, joined by device index (a's values first)."""
    if not a or not b:
        return a or b
    by_index = {d.index: d for d in b}
    out = []
    for d in a:
        o = by_index.pop(d.index, None)
        if o is not None:
            d = replace(d, profile=d.profile or o.profile, uuid=d.uuid or o.uuid,
                        memory_mib=d.memory_mib if d.memory_mib is not None else o.memory_mib,
                        gpu_instance=d.gpu_instance if d.gpu_instance is not None else o.gpu_instance,
                        compute_instance=d.compute_instance if d.compute_instance is not None else o.compute_instance)
        out.append(d)
    return tuple(out) + tuple(by_index.values())


def with_devices(gpus: tuple[Gpu, ...], devices: dict[int, tuple[MigDevice, ...]]) -> tuple[Gpu, ...]:
    """GPUs with the MIG devices another output lists for their index; a GPU with devices has MIG on."""
    out = []
    for g in gpus:
        found = devices.get(g.index, ())
        if found:
            g = replace(g, mig_devices=merge(g.mig_devices, found), mig_mode=g.mig_mode or "Enabled")
        out.append(g)
    return tuple(out)

