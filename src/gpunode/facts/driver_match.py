"""Does the driver's user-space on the target match the kernel module it talks to?

In an LXC container the kernel module is the host's (its version shows in the container's
/proc/driver/nvidia/version) while libcuda/libnvidia-ml are the container's own files. After
a host driver upgrade they differ and every CUDA program fails:

    Failed to initialize NVML: Driver/library version mismatch
    NVML library version: 570.124

(tests/data/driver-mismatch/README.md). `check(raw, facts)` finds it from the facts the probe
already gathers; the provision pipeline refuses on it before anything changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpunode.facts import cuda, gpu
from gpunode.facts.snapshot import RawFacts
from gpunode.facts.types import Facts

_NVML = re.compile(r"NVML library version:\s*(\d+\.\d+(?:\.\d+)?)")
MISMATCH_TEXT = "Driver/library version mismatch"


@dataclass(frozen=True)
class Mismatch:
    kernel: str | None      # the module's version (the host's, inside a container); None: unreadable
    userspace: str          # libcuda / libnvidia-ml / NVML's own version in the target
    evidence: str


def _same(kernel: str, userspace: str) -> bool:
    # NVML prints major.minor only ("570.124" for 570.124.06).
    return kernel == userspace or kernel.startswith(userspace + ".")


def check(raw: RawFacts, facts: Facts) -> Mismatch | None:
    proc = raw.ok("driver_proc")
    kernel = gpu.parse_proc_version(proc) if proc else None
    libs = cuda.parse_libs(raw.ok("libs") or "")
    smi = "\n".join(s.output for s in (raw.get("nvidia_query"), raw.get("nvidia_smi")) if s is not None)
    nvml = _NVML.search(smi) if MISMATCH_TEXT in smi else None
    userspace = libs.libcuda_version or libs.nvml_version or (nvml.group(1) if nvml else None)
    if nvml:  # NVML's own verdict; its major.minor alone may look equal (570.124 of 570.124.04 vs .06)
        return Mismatch(kernel, userspace or nvml.group(1), smi.strip()[:500])
    if kernel and userspace and not _same(kernel, userspace):
        found = ", ".join(f"{n}.so.{v}" for n, v in (("libcuda", libs.libcuda_version),
                                                     ("libnvidia-ml", libs.nvml_version)) if v)
        return Mismatch(kernel, userspace, f"kernel module {kernel} (/proc/driver/nvidia/version); {found}")
    return None


def message(m: Mismatch, target: str, in_container: bool, host: str = "", vmid: int | None = None,
            gpus: list[int] | None = None) -> tuple[str, str]:
    """(message, hint) naming both versions and what repairs it."""
    kernel = m.kernel or "unreadable"
    text = (f"driver mismatch on {target}: the NVIDIA user-space libraries are {m.userspace} but the kernel "
            f"module is {kernel}; they must be the same version ('Failed to initialize NVML: {MISMATCH_TEXT}')")
    if in_container and host and vmid is not None:
        g = f" --gpus {','.join(map(str, gpus))}" if gpus else " --gpus ..."
        hint = (f"re-run inv onboard --host {host} --ct {vmid}{g}: it installs the host's driver version "
                f"({kernel}) into the container")
    else:
        hint = ("reboot so that the installed driver's kernel module loads, or reinstall the user-space of the "
                f"running module ({kernel})")
    return text, hint
