"""Judge environments: a pin set's own sglang and dependencies, runnable on a machine without a GPU.

One base venv holds torch (the CUDA build, which imports fine without a GPU) and torchvision; each
pin set gets a folder of its lock's packages at the lock's versions (`pip install --no-deps
--target`), put in front of the base's site-packages. Left out of that folder:
- torch and its family: the base's torch stands in for every pin set's torch (one build of several
  GB instead of one per pin set; argument checks ask torch for the device, which is stubbed);
- the GPU-only kernel packages (STAND_INS): their native code needs libcuda; child.py gives
  sglang an importable stand-in under their import names;
- NVIDIA's CUDA library wheels (nvidia-*): no GPU here; torch brings its own.

Everything is cached under the judge's folder (GPUNODE_JUDGE_CACHE, else ~/.cache/gpunode/judge):
a second build costs nothing. Needs PyPI (or pip's configured mirror) for the first build.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from gpunode.errors import GpunodeError

BASE = ("torch==2.14.1", "torchvision==0.29.1")
TORCH_FAMILY = frozenset({"torch", "torchvision", "torchaudio", "torchcodec", "triton"})
# lock package -> the import names that child.py stands in for it
STAND_INS: dict[str, tuple[str, ...]] = {
    "sglang-kernel": ("sgl_kernel",),
    "sgl-kernel": ("sgl_kernel",),
    "flashinfer-python": ("flashinfer",),
    "flashinfer-cubin": ("flashinfer_cubin",),
    "flashinfer-jit-cache": ("flashinfer_jit_cache",),
    "sgl-deep-gemm": ("deep_gemm",),
    # left out with no stand-in: transformers takes an importable flash_attn for an installed one and
    # looks up its distribution (KeyError 'flash_attn' in sglang 0.5.12.post1's transformers patches)
    "flash-attn-4": (),
    "nvidia-cutlass-dsl": ("cutlass",),
    "nvidia-cutlass-dsl-libs-base": (),
    "nvidia-cutlass-dsl-libs-cu12": (),
    "nvidia-cutlass-dsl-libs-cu13": (),
    "tilelang": ("tilelang",),
    "quack-kernels": ("quack",),
    "tokenspeed-mla": ("tokenspeed_mla",),
    "tokenspeed-triton": ("tokenspeed_triton",),
    "torch-memory-saver": ("torch_memory_saver",),
    "humming-kernels": ("humming",),
    "sgl-flash-mla": ("flash_mla", "sgl_flash_mla"),
    "sgl-deep-ep": ("deep_ep",),
    "nvshmem4py-cu13": ("nvshmem",),
    "nccl-extensions": (),
    "z3-solver": (),          # tilelang's solver, 27 MB, imported only through tilelang
}
PYTHON = f"{sys.version_info.major}{sys.version_info.minor}"
CHILD = Path(__file__).with_name("child.py")


class JudgeError(GpunodeError):
    """A judge environment could not be built or run."""


@dataclass(frozen=True)
class JudgeEnv:
    pinset: str
    python: Path            # the base venv's interpreter
    site: Path              # the pin set's packages, first on PYTHONPATH
    stand_ins: tuple[str, ...]

    def environ(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "CUDA_", "SGLANG_"))}
        env.update(PYTHONPATH=str(self.site), GPUNODE_JUDGE_STANDINS=",".join(self.stand_ins),
                   HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
                   PYTHONWARNINGS="ignore", PYTHONDONTWRITEBYTECODE="1")
        return env


def cache_root() -> Path:
    return Path(os.environ.get("GPUNODE_JUDGE_CACHE") or Path.home() / ".cache" / "gpunode" / "judge")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_file(locks: Path, pinset: str, machine: str = "x86_64") -> Path:
    return locks / pinset / f"pylock.{machine}-py{PYTHON}.toml"


def lock_packages(path: Path) -> dict[str, str]:
    """name -> version of a pylock.toml."""
    with path.open("rb") as f:
        data = tomllib.load(f)
    return {_normal(p["name"]): p["version"] for p in data.get("packages", [])}


def split(packages: dict[str, str]) -> tuple[list[str], tuple[str, ...]]:
    """(requirements to install, import names to stand in)."""
    wanted: list[str] = []
    stand: list[str] = []
    for name, version in sorted(packages.items()):
        if name in STAND_INS:
            stand.extend(STAND_INS[name])
            continue
        if name in TORCH_FAMILY or name.startswith(("nvidia-", "cuda-toolkit")):
            continue
        wanted.append(f"{name}=={version}")
    return wanted, tuple(dict.fromkeys(stand))


def _pip(python: Path, args: list[str], what: str) -> None:
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    proc = subprocess.run([str(python), "-m", "pip", *args], capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise JudgeError(f"pip could not install {what}:\n{tail}",
                         hint="the judge needs PyPI (or pip's configured mirror) the first time; run again once "
                              "it is reachable")


def base(root: Path, log=print) -> Path:
    venv = root / "base"
    python = venv / "bin" / "python"
    done = venv / ".gpunode-done"
    if done.exists():
        return python
    log(f"judge: base venv with {' '.join(BASE)} (once; several GB) in {venv}")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=600)
    _pip(python, ["install", "-q", *BASE], "the judge's torch")
    done.write_text(" ".join(BASE) + "\n")
    return python


def build(pinset: str, locks: Path, root: Path | None = None, log=print) -> JudgeEnv:
    """The judge environment of one pin set, built on first use (idempotent; a cut-off build is redone)."""
    root = root or cache_root()
    lock = lock_file(locks, pinset)
    if not lock.exists():
        raise JudgeError(f"pin set {pinset} has no lock for Python {PYTHON[0]}.{PYTHON[1:]} on x86_64 ({lock})",
                         hint="make it with `inv pinsets.lock`, or judge a pin set of the same sglang version")
    python = base(root, log)
    wanted, stand = split(lock_packages(lock))
    key = hashlib.sha256("\n".join(wanted).encode()).hexdigest()[:12]
    site = root / "sites" / f"{pinset}-{key}"
    done = site / ".gpunode-done"
    if not done.exists():
        log(f"judge: {len(wanted)} packages of pin set {pinset}'s lock into {site}")
        tmp = site.with_name(site.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        _pip(python, ["install", "-q", "--no-deps", "--no-compile", "--target", str(tmp), *wanted],
             f"pin set {pinset}'s packages")
        (tmp / ".gpunode-done").write_text("\n".join(wanted) + "\n")
        shutil.rmtree(site, ignore_errors=True)
        tmp.rename(site)
    return JudgeEnv(pinset, python, site, stand)
