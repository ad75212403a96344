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
from gpunode.lab import paths

Progress = Callable[[str], None]

WHEELS = paths.SHARE_WHEELS / "cpu"
MODEL = paths.SHARE_MODELS / "tiny-qwen3"
TOOLS = paths.CACHE / "tools-venv"  # torch + transformers on the host, only to make the model
MODEL_PACKAGES = ("torch==2.13.0+cpu", "transformers", "tokenizers", "safetensors")


def requirements() -> list[str]:
    # Imported here: `python -m gpunode.lab.tinymodel` runs in a venv with torch but
    # without gpunode's own dependencies, and imports this module through gpunode.lab.
    from gpunode import roles
    from gpunode.lab.wheelhouse import CPU_PROFILE

    return [*CPU_PROFILE, roles.defaults(("base",))["base_uv_requirement"]]


def _run(argv: list[str], what: str, **kw) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        raise StepError(f"{what} failed (exit {result.returncode})", target="lab",
                        evidence=tail(result.stderr or result.stdout, 20),
                        hint="re-run `inv lab.up`; it resumes from what is already there")


def prepare(progress: Progress | None = None) -> dict[str, str]:
    say = progress or (lambda _line: None)
    from gpunode.lab.wheelhouse import build_wheelhouse

    say(f"cpu profile: wheelhouse {WHEELS}")
    house = build_wheelhouse(WHEELS, requirements())
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
        src = Path(__file__).resolve().parents[2]
        _run([str(TOOLS / "bin" / "python"), "-m", "gpunode.lab.tinymodel", str(tmp)], "making the tiny model",
             env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
        tmp.rename(MODEL)
    info = json.loads(stamp.read_text())
    say(f"cpu profile: model {MODEL.name} ({info.get('parameters', '?')} parameters)")
    return {"wheels": str(WHEELS), "model": str(MODEL)}
