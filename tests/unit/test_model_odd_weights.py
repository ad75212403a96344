"""A weights file the servers would load that is a FIFO, a device or a link to nothing is refused by
name (issue 41: a model whose only weights file was a FIFO got a plan, its size estimated from
config.json). Through the real probe (sh and find on this machine) and `inv resolve --model` offline."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode.facts.parse import parse
from gpunode.facts.probe import gather
from gpunode.transport.local import LocalTransport

REPO = Path(__file__).resolve().parents[2]
SMI = REPO / "tests" / "data" / "nvidia-smi" / "rtx-pro-6000-x8" / "nvidia-smi.txt"
# a Llama 3.x shape: a family whose size the estimate knows, so that only the weights file is wrong
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16,
         "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192, "vocab_size": 128256,
         "torch_dtype": "bfloat16", "tie_word_embeddings": True}


def model(folder: Path, odd: str, make) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA))
    (folder / odd).parent.mkdir(parents=True, exist_ok=True)
    make(folder / odd)
    return folder


CASES = [
    ("model.safetensors", os.mkfifo, r"the weights file model\.safetensors is a named pipe \(FIFO\)"),
    ("pytorch_model.bin", os.mkfifo, r"the weights file pytorch_model\.bin is a named pipe \(FIFO\)"),
    ("model.safetensors", lambda p: p.symlink_to("../blobs/gone"),
     r"the weights file model\.safetensors is a symbolic link to a missing file"),
]


@pytest.mark.parametrize(("name", "make", "said"), CASES)
def test_the_probe_names_a_weights_file_that_is_no_file(tmp_path, name, make, said):
    m = parse(gather(LocalTransport("here"), model_path=str(model(tmp_path / "m", name, make)))).model
    assert m is not None and m.exists
    assert m.config_problem and re.search(said, m.config_problem), m.config_problem


@pytest.mark.parametrize(("name", "make", "said"), CASES[:2])
def test_resolve_offline_refuses_it_at_once(tmp_path, name, make, said):
    folder = model(tmp_path / "m", name, make)
    code = "import sys; from gpunode.cli.main import main; sys.argv[0] = 'gpunode'; main()"
    out = subprocess.run([sys.executable, "-c", code, "resolve", "--nvidia-smi", str(SMI), "--model", str(folder)],
                         capture_output=True, text=True, cwd=REPO, timeout=120,
                         env={**os.environ, "GPUNODE_INVENTORY": str(REPO / "inventory")})
    assert out.returncode == 2, out.stderr
    assert re.search(said, out.stderr) and "hint:" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_a_fifo_among_the_copies_the_servers_do_not_load_is_left_alone(tmp_path):
    folder = model(tmp_path / "m", "original/consolidated.00.pth", os.mkfifo)
    (folder / "model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    m = parse(gather(LocalTransport("here"), model_path=str(folder))).model
    assert m is not None and m.config_problem == "" and m.size_bytes > 0
