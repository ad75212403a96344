"""The tiny lab model: what a server loading it would see.

Building it needs torch + transformers + tokenizers, which the dev venv must
not carry; these tests run the module with the interpreter named by
GPUNODE_TORCH_PYTHON (default: the lab's model tools venv, which `inv lab.up`
makes) and skip without it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode.errors import StepError
from gpunode_lab.tinymodel import make_tiny_model

SRC = Path(__file__).resolve().parents[2] / "src"
# `inv lab.up` leaves such a python behind (the venv it makes the lab's model with).
TORCH_PYTHON = os.environ.get("GPUNODE_TORCH_PYTHON", "/var/cache/gpunode-lab/tools-venv/bin/python")
needs_torch = pytest.mark.skipif(
    not (TORCH_PYTHON and Path(TORCH_PYTHON).exists()),
    reason="set GPUNODE_TORCH_PYTHON to a python that has torch, transformers and tokenizers",
)


def run_torch_python(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"),
           "PYTHONPATH": f"{SRC.parent / 'lab'}:{SRC}", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([TORCH_PYTHON, *args], env=env, capture_output=True, text=True, timeout=300)


def build(out: Path, *extra: str) -> Path:
    proc = run_torch_python("-m", "gpunode_lab.tinymodel", str(out), *extra)
    assert proc.returncode == 0, proc.stderr
    return out


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("tiny") / "model")


def test_unknown_family_is_refused_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(StepError) as err:
        make_tiny_model(tmp_path / "m", family="gpt2")
    assert "gpt2" in str(err.value) and "qwen3" in err.value.hint
    assert not (tmp_path / "m").exists()


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is importable here")
def test_without_torch_the_error_names_the_interpreter(tmp_path: Path) -> None:
    with pytest.raises(StepError) as err:
        make_tiny_model(tmp_path / "m")
    assert sys.executable in str(err.value) and "venv" in err.value.hint


@needs_torch
def test_config_has_the_served_shape(model: Path) -> None:
    config = json.loads((model / "config.json").read_text())
    assert config["architectures"] == ["Qwen3ForCausalLM"]
    assert (config["num_hidden_layers"], config["hidden_size"]) == (2, 256)
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]) == (4, 2, 64)
    assert config["vocab_size"] == 2048 and config["dtype"] == "bfloat16"
    assert json.loads((model / "generation_config.json").read_text())["max_new_tokens"] == 64
    # 1.7 M bfloat16 parameters and a small header: a file of about 3.4 MB.
    assert 3_300_000 < (model / "model.safetensors").stat().st_size < 3_500_000


@needs_torch
def test_tokenizer_round_trips_and_renders_chatml(model: Path) -> None:
    probe = (
        "import json, sys\n"
        "from transformers import AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained(sys.argv[1])\n"
        "text = 'def main() -> int:\\n    return 0  # ünïcode'\n"
        "ids = tok.encode(text, add_special_tokens=False)\n"
        "chat = tok.apply_chat_template([{'role': 'user', 'content': 'hi'}], tokenize=False,"
        " add_generation_prompt=True)\n"
        "print(json.dumps({'n': len(tok), 'ids': ids, 'back': tok.decode(ids), 'text': text, 'chat': chat,"
        " 'eos': tok.eos_token}))\n"
    )
    proc = run_torch_python("-c", probe, str(model))
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["n"] == 2048
    assert got["back"] == got["text"]
    # Trained merges compress code: far fewer tokens than bytes.
    assert len(got["ids"]) < len(got["text"].encode()) / 2
    assert got["chat"] == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert got["eos"] == "<|im_end|>"


@needs_torch
def test_same_seed_same_weights_other_seed_other_weights(model: Path, tmp_path: Path) -> None:
    again = build(tmp_path / "again")
    other = build(tmp_path / "other", "--seed", "1")
    assert sha(again / "model.safetensors") == sha(model / "model.safetensors")
    assert sha(again / "tokenizer.json") == sha(model / "tokenizer.json")
    assert sha(other / "model.safetensors") != sha(model / "model.safetensors")
