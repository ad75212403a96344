"""The CUDA toolkit that flashinfer's and SGLang's JIT compilers will use.

Its nvcc must have torch's CUDA major.minor (docs/sources.md#pip-nvcc and
docs/sources.md#mixed-toolkits). CUDA 13 stacks always get pip's nvcc pinned inside the venv: the
pin sets pull pip CUDA packages anyway (humming-kernels even pulls an unpinned
nvcc), and a venv-owned toolkit can take the CCCL overlay without touching the
system. CUDA 12 stacks use a system toolkit of exactly torch's version when
there is one (pip's CUDA 12 layout splits headers across packages), else pip's.
"""

from __future__ import annotations

from gpunode.facts.types import Facts
from gpunode.resolve import versions
from gpunode.resolve.hardware import GpuSet
from gpunode.resolve.kb import KB, Pinset
from gpunode.resolve.plan import Toolkit
from gpunode.resolve.trail import Trail

# Each cache a server fills, and the variable that moves it, read in the pinned wheels' sources
# (tests/data/jit-caches/README.md has each wheel's line). Without them some land in /tmp, which
# a reboot (or a unit's PrivateTmp) empties: torch.compile's Inductor cache (/tmp/torchinductor_root),
# CuTe DSL's (/tmp/root/cutlass_python_cache), quack's (/tmp/root/quack_cache); the others in /root,
# beyond teardown and the one folder a user can copy to the next node.
_CACHES = {
    "FLASHINFER_WORKSPACE_BASE": "",   # flashinfer: <base>/.cache/flashinfer: JIT ops, cubins, autotune
    "TRITON_CACHE_DIR": "triton",      # default ~/.triton/cache
    "TVM_FFI_CACHE_DIR": "tvm-ffi",    # default ~/.cache/tvm-ffi
    "TORCHINDUCTOR_CACHE_DIR": "torchinductor",  # torch.compile; default /tmp/torchinductor_<user>
    "CUDA_CACHE_PATH": "nv-compute",   # the driver's PTX JIT cache; default ~/.nv/ComputeCache
    "SGLANG_CACHE_DIR": "sglang",      # SGLang's torch compile cache (and newer releases' deep_gemm)
    "SGLANG_DG_CACHE_DIR": "deep_gemm",  # SGLang's DeepGEMM JIT (DG_JIT_CACHE_DIR); default ~/.cache/deep_gemm
    "CUTE_DSL_CACHE_DIR": "cute-dsl",  # nvidia-cutlass-dsl; default /tmp/<user>/cutlass_python_cache
    "QUACK_CACHE_DIR": "quack",        # quack-kernels; default /tmp/<user>/quack_cache
    "TILELANG_CACHE_DIR": "tilelang",  # default ~/.tilelang/cache
    "VLLM_CACHE_ROOT": "vllm",         # vLLM's torch compile cache; default ~/.cache/vllm
}


def jit_env(cache: str) -> dict[str, str]:
    """Point every JIT and compile cache at one persistent folder, cuda_jit_cache (docs/sources.md#jit-caches)."""
    env = {"XDG_CACHE_HOME": cache}  # torch_extensions and whatever else follows XDG
    env.update({name: f"{cache}/{sub}" if sub else cache for name, sub in _CACHES.items()})
    return {**env, "HOME": "/root"}


def site_packages(venv: str, python: str) -> str:
    return f"{venv}/lib/python{python}/site-packages"


def choose(p: Pinset, facts: Facts, gpus: GpuSet | None, venv: str, python: str, kb: KB, trail: Trail) -> Toolkit:
    if gpus is None or not p.torch_cuda:
        return Toolkit(None, None, None)
    want = p.torch_cuda
    found = [t for t in facts.system.toolkits if t.kind == "system"]
    listing = ", ".join(f"{t.version} at {t.path}" for t in found) or "none"
    fact = f"system.toolkits: {listing}; torch {p.torch_version} is CUDA {want}"
    nvcc = kb.nvcc[want]
    need = p.flashinfer.nvcc_min.get(gpus.arch.cc) if p.flashinfer else None
    why_need = (f"; flashinfer {p.flashinfer.version} needs nvcc >= {need} on compute capability {gpus.arch.cc}"
                if need and p.flashinfer else "")
    match = [t for t in found if versions.major_minor(t.version) == want]
    if match and p.cuda_major == 13:
        trail.decide("JIT toolkit", f"pip CUDA {want} at {site_packages(venv, python)}/{nvcc.cuda_home}",
                     f"CUDA 13 stacks use the venv's own nvcc pinned to torch's {want} "
                     f"({', '.join(nvcc.packages)}); the system's {match[0].version} at {match[0].path} is left "
                     f"alone{why_need}", fact=fact, rule="compat/pinsets.yml nvcc_packages", source=nvcc.source)
        return Toolkit("pip", f"{site_packages(venv, python)}/{nvcc.cuda_home}", want)
    if match:
        t = match[0]
        trail.decide("JIT toolkit", f"system CUDA {t.version} at {t.path}",
                     f"its nvcc matches torch's CUDA {want}{why_need}; CUDA_HOME points at it",
                     fact=fact, rule="compat/pinsets.yml nvcc_packages", source=nvcc.source)
        return Toolkit("system", t.path, want)
    cuda_home = f"{site_packages(venv, python)}/{nvcc.cuda_home}"
    reason = f"no system toolkit has CUDA {want}, torch's CUDA"
    if found:
        reason += (f"; the system's {found[0].version} would be found first through /usr/local/cuda or PATH and "
                   "break the JIT (mixed toolkits)")
    reason += f"{why_need}; pip's nvcc is pinned to {want} ({', '.join(nvcc.packages)}) and CUDA_HOME points at it"
    trail.decide("JIT toolkit", f"pip CUDA {want} at {cuda_home}", reason, fact=fact,
                 rule="compat/pinsets.yml nvcc_packages", source=nvcc.source)
    return Toolkit("pip", cuda_home, want)
