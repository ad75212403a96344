"""Facts for the resolver tests.

GPUs and drivers come from the recorded nvidia-smi outputs under
tests/data/nvidia-smi (see its README for where each came from), parsed by
gpunode's own parsers; the H200 case uses the whole recorded snapshot under
tests/data/snapshots/h200. System and model facts are built here from the
facts in docs/sources.md (#field-notes and the sections the rules cite),
since no such recordings exist.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gpunode.facts import gpu, parse, snapshot
from gpunode.facts.types import CudaToolkit, Driver, Facts, Install, Model, System

DATA = Path(__file__).resolve().parents[1] / "data"
GB = 10**9


def smi(shape: str) -> tuple[tuple, Driver]:
    folder = DATA / "nvidia-smi" / shape

    def text(name: str) -> str | None:
        path = folder / name
        return path.read_text() if path.exists() else None

    gpus, driver, _ = gpu.gpus_and_driver(text("query-gpu.csv"), text("nvidia-smi.txt"), text("nvidia-smi-q.txt"),
                                          None)
    return gpus, driver


# The kpro6 container of the field notes: Debian 12, Python 3.11, a CUDA 12.8 toolkit.
KPRO6_CT = System(os_id="debian", os_version="12", arch="x86_64", glibc="2.36", pythons=("3.11",),
                  default_python="3.11", cpus=64, mem_total_bytes=512 * GB, shm_size_bytes=256 * GB,
                  shm_free_bytes=200 * GB, libcuda=True, libnuma=False, in_container=True,
                  toolkits=(CudaToolkit("/usr/local/cuda-12.8", "12.8", "system"),))

# The lab's CPU machine kind (docs/lab.md): Debian 12, 2 cores, 24 GiB, no GPU.
LAB_CPU = System(os_id="debian", os_version="12", arch="x86_64", glibc="2.36", pythons=("3.11",),
                 default_python="3.11", cpus=2, mem_total_bytes=24 * (1 << 30))

# Qwen3.6-27B as staged in the field notes: 52 GB, 15 shards, no mtp.* tensors.
QWEN36 = Model(path="/dev/shm/Qwen3.6-27B", architectures=("Qwen3_5ForConditionalGeneration",),
               model_type="qwen3_5", text_model_type="qwen3_5_text", hybrid_linear_attention=True,
               dtype="bfloat16", size_bytes=52 * GB,
               shards=tuple(f"model-{i:05d}-of-00015.safetensors" for i in range(1, 16)),
               mtp_config=True, mtp_weights=False)
QWEN36_MTP = replace(QWEN36, mtp_weights=True)

TINY_QWEN3 = Model(path="/srv/models/tiny-qwen3", architectures=("Qwen3ForCausalLM",), model_type="qwen3",
                   dtype="bfloat16", size_bytes=3_400_000)


def field_notes(**changes: object) -> Facts:
    """kpro6/200: eight RTX PRO 6000 (recorded shape), CUDA 12.8 container, Qwen3.6-27B without MTP weights."""
    gpus, driver = smi("rtx-pro-6000-x8")
    facts = Facts("kpro6/200", gpus, driver, KPRO6_CT,
                  Install(venv="/root/venv", python="3.11", torch="2.11.0", torch_cuda="12.8"), QWEN36)
    return replace(facts, **changes)  # type: ignore[arg-type]


def on(shape: str, model: Model | None = QWEN36, system: System = KPRO6_CT, **changes: object) -> Facts:
    gpus, driver = smi(shape)
    return replace(Facts(shape, gpus, driver, system, Install(), model), **changes)  # type: ignore[arg-type]


def h200(model: Model | None = QWEN36) -> Facts:
    """The recorded H200 snapshot (Ubuntu 24.04, driver 580.159.04, CUDA 13.0 toolkit) plus a model."""
    return replace(parse.parse(snapshot.load(DATA / "snapshots" / "h200")), model=model)


def cpu_box(model: Model | None = TINY_QWEN3) -> Facts:
    return Facts("lab-cpu", (), Driver(None, None), LAB_CPU, Install(), model)


def backend_of(plan) -> str:
    """The attention backend a server runs with: the one passed, or SGLang's own pick where the plan
    leaves it to SGLang (the derived data, compat/derived/sglang-choices.yml); "" where it is left to
    SGLang for an architecture nothing was derived for (SGLang's choice, unknown here)."""
    argv = plan.servers[0].argv
    if "--attention-backend" in argv:
        return argv[argv.index("--attention-backend") + 1]
    value = plan.decision("attention backend").value
    assert value.startswith("left to SGLang"), value
    return value.removeprefix("left to SGLang").removeprefix(" (").removesuffix(")")
