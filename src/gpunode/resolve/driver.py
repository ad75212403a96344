"""The NVIDIA driver against a pin set's CUDA: natively supported, under minor
version compatibility, or too old.

NVIDIA's CUDA compatibility guide: from CUDA 11 on, a runtime of one CUDA major
release runs on any driver of that major's minimum (CUDA 12.x: >= 525, CUDA
13.x: >= 580) "with limited feature-set"; the limit that matters here is that
such a driver cannot JIT-compile PTX newer than its own CUDA version
(CUDA_ERROR_UNSUPPORTED_PTX_VERSION). Kernels that arrive as SASS for the GPU
are unaffected.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.facts.types import Facts
from gpunode.resolve import versions
from gpunode.resolve.hardware import GpuSet
from gpunode.resolve.kb import Pinset

COMPAT_URL = "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html"


@dataclass(frozen=True)
class Floor:
    need: str           # the lowest driver that runs the pin set on these GPUs
    why: str            # "CUDA 13.0" or "compute capability 12.0"


def floor(p: Pinset, gpus: GpuSet | None) -> Floor | None:
    """The driver floor of `p` on `gpus`: its CUDA major's compatibility floor or the GPU's own, the higher."""
    rows = []
    if p.driver_min:
        rows.append(Floor(p.driver_min, f"CUDA {p.torch_cuda}"))
    if gpus is not None and gpus.arch.min_driver:
        rows.append(Floor(gpus.arch.min_driver, f"compute capability {gpus.arch.cc}"))
    return max(rows, key=lambda f: versions.parse(f.need)) if rows else None


def native(p: Pinset, driver: str | None) -> bool | None:
    """The driver's own CUDA version covers the pin set's (None: unknown)."""
    if not driver or not p.driver_native or not p.torch_cuda:
        return None
    return versions.at_least(driver, p.driver_native)


def compat_reason(p: Pinset, facts: Facts, gpus: GpuSet) -> str:
    """Why a pin set runs on an older driver, and what that costs."""
    drv, own = facts.driver.version, facts.driver.cuda
    native_cuda = f"CUDA {own}" if own else f"a CUDA older than {p.torch_cuda}"
    cc = gpus.arch.cc.replace(".", "")
    return (f"driver {drv} supports {native_cuda} natively (CUDA {p.torch_cuda} from {p.driver_native}); "
            f"{p.id}'s CUDA {p.torch_cuda} runtime runs on it through CUDA minor version compatibility "
            f"(CUDA {p.cuda_major}.x needs a driver >= {p.driver_min}), whose limit is that the driver cannot "
            f"JIT-compile PTX newer than its own CUDA: kernels must arrive as SASS for sm_{cc}. "
            f"flashinfer's JIT compiles SASS (-gencode=arch=compute_X,code=sm_X), Triton assembles cubins with its "
            f"own ptxas, and torch and the kernel wheel ship SASS for this architecture, so none of them needs the "
            f"driver's PTX JIT; a kernel shipped only as newer PTX would fail with CUDA_ERROR_UNSUPPORTED_PTX_VERSION")
