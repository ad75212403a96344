"""What the 2026-12-07 device session shows (tests/data/device/h100-plans/README.md): the packed bundle
installed there with its executables executable, and SGLang's own checks on the real GPU refusing a plan
whose staged --model-path is not there yet. Nothing was served that day; no argv is held to it.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpunode.facts import snapshot
from gpunode.facts.parse import parse

DATA = Path(__file__).resolve().parents[1] / "data" / "device" / "h100-plans"


def test_the_machine_was_an_h100_on_driver_580():
    facts = parse(snapshot.load(DATA / "facts-dense"))
    (gpu,) = facts.gpus
    assert (gpu.name, gpu.compute_cap, facts.driver.version) == ("NVIDIA H100 80GB HBM3", "9.0", "580.159.04")


def test_the_packed_bundle_installed_the_compiler_and_the_venv_imports():
    rec = json.loads((DATA / "install.json").read_text())
    installed = rec["install"]["installed"]
    assert {"nvidia-cuda-nvcc==13.0.88", "nvidia-nvvm==13.0.88", "sglang==0.5.17"} <= set(installed)
    assert all(step["rc"] == 0 for step in rec["install"]["log"])
    assert rec["cuda_fixes"]["ok"] and not rec["cuda_fixes"]["failed"]
    assert rec["imports"]["stdout"].split()[:4] == ["0.5.17", "0.6.15.post1", "5.12.1", "2.11.0+cu130"]


def test_the_compilers_files_came_out_executable():
    """`ls -l` of the venv's nvidia/cu13/bin after the install: each file of nvidia-cuda-nvcc is 0755
    (the packer before issue 42 wrote 0600, and nvcc failed with PermissionError)."""
    files = [line.split() for line in (DATA / "install-call-tail.txt").read_text().splitlines()
             if line.startswith("-")]
    assert {f[-1] for f in files} >= {"bin2c", "cudafe++", "fatbinary"}
    assert all(f[0] == "-rwxr-xr-x" for f in files)


def test_sglang_on_the_gpu_refused_every_plan_whose_staged_model_was_not_there_yet():
    """judge_gpu.py judged before the weights role staged the models: SGLang took each /dev/shm path for a
    hub repository id. A node judge must run after staging (judge_gpu.py now stages first)."""
    rec = json.loads((DATA / "judge-unstaged.json").read_text())
    assert rec["rc"] == 0 and rec["import"]["import_s"] > 5  # the child's start and sglang's import
    paths = {c["id"]: c["argv"][c["argv"].index("--model-path") + 1] for c in rec["cases"]}
    assert set(paths) == {"hybrid", "no_buffer-with-overlap", "mtp", "mtp-off", "hybrid-moe", "mla", "gpt-oss"}
    for verdict in rec["verdicts"]:
        assert verdict["accepted"] is False
        assert "Repo id must be in the form" in verdict["error"] and paths[verdict["id"]] in verdict["error"]
        assert paths[verdict["id"]].startswith("/dev/shm/")
        assert verdict["where"].startswith("srt/utils/hf_transformers/config.py")
    assert "GPUNODE_JUDGE_STANDINS" not in rec["env"]  # no stand-ins: the real kernels and the real GPU
