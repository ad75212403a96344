"""GPUs split by MIG: each MIG device is the GPU one server sees.

A MIG-enabled GPU cannot run a server whole: CUDA sees it only through its MIG devices, each
named by its UUID in CUDA_VISIBLE_DEVICES. A server is one CUDA process and enumerates one MIG
device, and MIG devices have no CUDA IPC or NVLink between them, so a model that does not fit
one device is refused rather than split by tensor parallelism across devices.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.errors import ResolveError
from gpunode.facts.types import Facts, Gpu, MigDevice
from gpunode.resolve import versions
from gpunode.resolve.kb import Pinset
from gpunode.resolve.trail import Trail

SOURCE = ("https://docs.nvidia.com/datacenter/tesla/mig-user-guide/mig-device-names.html (Device Enumeration: "
          "CUDA_VISIBLE_DEVICES=MIG-<UUID>, one MIG device per CUDA process); "
          "https://docs.rapids.ai/deployment/stable/guides/mig (no CUDA IPC, NVLink or NVSwitch under MIG)")
WHY_NO_TP = ("a server is one CUDA process, which enumerates a single MIG device, and MIG devices have no CUDA IPC "
             "or NVLink between them for NCCL")
# vLLM reads each CUDA_VISIBLE_DEVICES entry with int() (vllm/platforms/interface.py
# device_id_to_physical_device_id) and exits before loading the model when it is a MIG UUID: seen with 0.10.0
# (A100, 2g.10gb) and 0.20.1 (H100, 2g.20gb); the fixes (PRs 41776, 41850, 46132) were not merged. A newer
# pinned vLLM is not refused until someone sees it fail too.
VLLM_BROKEN = "<=0.20.1"
VLLM_SOURCE = ("https://github.com/vllm-project/vllm/issues/41848 (vLLM 0.20.1, H100 MIG 2g.20gb: "
               "\"ValueError: invalid literal for int() with base 10: 'MIG-...'\"); "
               "https://github.com/vllm-project/vllm/pull/46132 (the same on 0.10.0, A100 MIG 2g.10gb)")
CREATE = ("create GPU and compute instances (nvidia-smi mig -cgi <profiles> -C) or turn MIG off "
          "(nvidia-smi -i N -mig 0, then reset the GPU)")


@dataclass(frozen=True)
class Instance:
    gpu: Gpu
    device: MigDevice

    @property
    def name(self) -> str:
        return f"gpu{self.gpu.index}-mig{self.device.index}"


def instances(facts: Facts, selected: tuple[Gpu, ...], trail: Trail) -> tuple[Instance, ...]:
    """The MIG devices of the selected GPUs, () when none has MIG on; a plan that cannot use them is refused."""
    on = [g for g in selected if g.mig_mode == "Enabled"]
    if not on:
        return ()
    off = [g.index for g in selected if g.mig_mode != "Enabled"]
    mig = [g.index for g in on]
    if off:
        raise ResolveError(f"GPUs {mig} have MIG enabled and GPUs {off} do not: one plan serves either MIG devices "
                           "or whole GPUs, and a MIG-enabled GPU cannot run a server whole", target=facts.target,
                           hint=f"choose one kind with the gpus variable: gpus: {mig} (one server per MIG device) or "
                                f"gpus: {off} (one per whole GPU)")
    for g in on:
        if not g.mig_devices:
            raise ResolveError(f"GPU {g.index} ({g.name}) has MIG enabled and the facts show no MIG device on it: "
                               "CUDA sees a MIG-enabled GPU only through its MIG devices, so no server can run there",
                               target=facts.target, hint=f"{CREATE}; from a pasted report, give the node's "
                               "`nvidia-smi -L` and `nvidia-smi` output together in one file")
        blind = [d.index for d in g.mig_devices if not d.uuid]
        if blind:
            raise ResolveError(f"GPU {g.index} ({g.name}): the UUIDs of MIG devices {blind} are not in the facts, and "
                               "a server reaches a MIG device only by CUDA_VISIBLE_DEVICES=MIG-<UUID>",
                               target=facts.target, hint="only `nvidia-smi -L` prints MIG UUIDs (the table, -q and "
                               "-q -x do not): add its output from the node to the file, beside the table")
        unsized = [d.index for d in g.mig_devices if not d.memory_mib]
        if unsized:
            # the profile's name is not its memory, nor a bound on it (`nvidia-smi mig -lgip`): 1g.24gb holds
            # 20.00 GiB on GB200 (NVIDIA/gpu-operator PR 1303), 23.12 GiB on one RTX PRO 6000 (bigstack-oss/
            # cubecos issue 312) and 23.62 GiB on another (GoogleCloudPlatform/container-engine-accelerators
            # PR 563); 1g.12gb 10.75 GiB on H100 NVL (NVIDIA/gpu-operator PR 903)
            raise ResolveError(f"GPU {g.index} ({g.name}): the memory of MIG devices {unsized} is not in the facts "
                               "(`nvidia-smi -L` shows none, and a profile's name is not its memory: 1g.24gb "
                               "is 20.00 GiB on a GB200 and 23.12 or 23.62 GiB on an RTX PRO 6000)",
                               target=facts.target, hint="add the node's `nvidia-smi` table (its MIG devices "
                               "section) or `nvidia-smi -q` to the file, beside the -L output")
    found = tuple(Instance(g, d) for g in on for d in g.mig_devices)
    listing = ", ".join(f"{i.name} {i.device.profile or '?'} {i.device.memory_mib} MiB" for i in found)
    trail.decide("mig", f"{len(found)} MIG device(s) on GPU(s) {mig}",
                 "MIG is enabled: each MIG device is a GPU of its own to CUDA, named by its UUID, so each runs one "
                 "server", fact=listing, rule="resolve/mig.py", source=SOURCE)
    return found


def check_engine(p: Pinset, target: str) -> None:
    """A MIG device is reached only through CUDA_VISIBLE_DEVICES=MIG-<UUID>; an engine that cannot read
    that cannot run on one."""
    if p.engine == "vllm" and versions.matches(p.version, VLLM_BROKEN):
        raise ResolveError(f"vLLM {p.version} cannot start on a MIG device: it reads CUDA_VISIBLE_DEVICES as GPU "
                           "numbers and exits on the MIG UUID that names the device (\"invalid literal for int() with "
                           "base 10: 'MIG-...'\")", target=target, evidence=f"source: {VLLM_SOURCE}",
                           hint="leave engine unset to run SGLang there, or turn MIG off to run vLLM on "
                                "whole GPUs")
