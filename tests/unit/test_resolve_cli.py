"""`inv resolve` offline: from a recorded nvidia-smi output plus a model directory,
and from the recorded H200 facts snapshot; run as a user would, through the
`gpunode` console entry (the same task tree as `inv`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.resolve_facts import DATA

REPO = Path(__file__).resolve().parents[2]
SMI = DATA / "nvidia-smi"


def gpunode(*args: str) -> subprocess.CompletedProcess:
    code = "import sys; from gpunode.cli.main import main; sys.argv[0] = 'gpunode'; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120, env={**os.environ, "GPUNODE_INVENTORY": str(REPO / "inventory")})


@pytest.fixture
def qwen36_dir(tmp_path: Path) -> Path:
    """A Qwen3.6-27B-shaped directory: config as in docs/sources.md#model-support and #mtp-weights,
    15 sparse shards of 52 GB in all (no disk used), a weight map without mtp.* tensors."""
    d = tmp_path / "Qwen3.6-27B"
    d.mkdir()
    layer_types = ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 16
    (d / "config.json").write_text(json.dumps({
        "architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
        "text_config": {"model_type": "qwen3_5_text", "layer_types": layer_types, "num_hidden_layers": 64,
                        "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False,
                        "dtype": "bfloat16"}}))
    shards = [f"model-{i:05d}-of-00015.safetensors" for i in range(1, 16)]
    weight_map = {f"model.language_model.layers.{i}.mlp.down_proj.weight": shards[i % 15] for i in range(64)}
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    for s in shards:
        with open(d / s, "wb") as f:
            f.truncate(52 * 10**9 // 15)
    return d


def test_offline_plan_from_nvidia_smi_and_a_model_directory(qwen36_dir: Path):
    out = gpunode("resolve", "--nvidia-smi", str(SMI / "rtx-pro-6000-x8" / "nvidia-smi.txt"),
                  "--model", str(qwen36_dir), "--json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["pinset"] == "cu13-latest" and plan["topology"]["servers"] == 8
    argv = plan["servers"][0]["argv"]
    assert "--attention-backend" not in argv               # sglang picks flashinfer itself on sm_120
    assert "--mamba-radix-cache-strategy" not in argv      # SGLang's own choice
    assert not any(a.startswith("--speculative") for a in argv)
    assert plan["model"]["size_bytes"] == 52 * 10**9 // 15 * 15 + sum(
        p.stat().st_size for p in qwen36_dir.iterdir() if p.suffix == ".json")
    assert any("offline" in w for w in plan["warnings"])


def test_offline_explain_shows_reasons_and_sources(qwen36_dir: Path):
    out = gpunode("resolve", "--nvidia-smi", str(SMI / "b200-x8" / "nvidia-smi.txt"),
                  "--model", str(qwen36_dir / "config.json"), "--explain")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())  # undo the wrapping
    assert "pin set: cu12-legacy" in text  # the recorded B200 driver is 575.57.08
    assert "cu13-latest (driver 575.57.08 < 580 (CUDA 13.0))" in text
    # SGLang would pick triton itself on the B200 (derived from its wheel); the Qwen3.5/3.6 cookbooks run trtllm_mha
    assert "attention backend: trtllm_mha" in text and "would pick triton itself" in text and "kb.refresh" in text


def test_snapshot_with_a_set_variable(tmp_path: Path):
    out = gpunode("resolve", "--facts", str(DATA / "snapshots" / "h200"), "--set", "model_path=/dev/shm/m",
                  "--set", "tp=1", "--set", "mem_fraction=0.85", "--json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    argv = plan["servers"][0]["argv"]
    assert argv[argv.index("--mem-fraction-static") + 1] == "0.85"
    # no model there to read an architecture from, so nothing derived and no rule: left to SGLang
    assert "--attention-backend" not in argv
    assert any(d["decision"] == "attention backend" and d["value"] == "left to SGLang" for d in plan["decisions"])


def test_refusal_exits_2_with_message_and_hint(qwen36_dir: Path):
    out = gpunode("resolve", "--nvidia-smi", str(SMI / "rtx-pro-6000-x8" / "nvidia-smi.txt"),
                  "--model", str(qwen36_dir), "--set", "attention_backend=fa3")
    assert out.returncode == 2
    assert "FA3 needs Hopper instructions" in out.stderr and "hint:" in out.stderr
    assert out.stdout == ""


def test_a_json_refusal_is_a_document_on_stdout_with_each_blocker(qwen36_dir: Path):
    out = gpunode("resolve", "--nvidia-smi", str(SMI / "rtx-pro-6000-x8" / "nvidia-smi.txt"),
                  "--model", str(qwen36_dir), "--set", "attention_backend=fa3", "--json")
    assert out.returncode == 2 and "FA3 needs Hopper instructions" in out.stderr
    doc = json.loads(out.stdout)
    assert doc["schema"] == "gpunode.refusal/1" and doc["error"] == "ResolveError"
    assert {b["pinset"] for b in doc["blockers"]} == {"cu13-latest", "cu13-b", "cu13-a", "cu12-legacy"}
    assert all(b["check"] == "attention" and b["unblock"] for b in doc["blockers"])
    assert doc["facts"]["gpus"][0]["compute_cap"] == "12.0" and doc["facts"]["driver"]["version"] == "590.48.01"


def test_a_json_refusal_before_any_facts_has_null_facts():
    out = gpunode("resolve", "--json")
    assert out.returncode == 2
    doc = json.loads(out.stdout)
    assert doc["error"] == "InventoryError" and doc["facts"] is None
    assert doc["blockers"][0]["check"] == "inventory" and "--nvidia-smi" in doc["message"]


def test_nothing_to_resolve_says_how():
    out = gpunode("resolve")
    assert out.returncode == 2 and "--nvidia-smi FILE --model PATH" in out.stderr
