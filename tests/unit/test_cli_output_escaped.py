"""Issue 29: what the target controls (GPU names, config.json fields, a snapshot's target name)
reaches the operator's terminal escaped, and Ansible's vars folders are read, not skipped.

The snapshot is the recorded H200 one (tests/data/snapshots/h200/README.md) with one field
edited to hold an escape sequence that would retitle (OSC 0) and clear (CSI 2J) a terminal.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode import inventory

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "data" / "snapshots" / "h200"
X8 = ROOT / "tests" / "data" / "nvidia-smi" / "rtx-pro-6000-x8" / "nvidia-smi.txt"
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b1m\u202e"
RAW = ("\x1b", "\x07", "\x9b", "\u202e")


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    code = "import sys; from gpunode.cli.main import main; main(['gpunode', *sys.argv[1:]])"
    env = {**os.environ, "HOME": str(cwd), "PYTHONUTF8": "1"}
    env.pop("GPUNODE_DEBUG", None)
    return subprocess.run([sys.executable, "-c", code, *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


def _snapshot(tmp_path: Path, gpu_name: str = "NVIDIA H200", target: str = "h200") -> Path:
    snap = tmp_path / "snap"
    shutil.copytree(H200, snap)
    query = snap / "nvidia_query.txt"
    query.write_text(query.read_text().replace("NVIDIA H200", gpu_name))
    meta = json.loads((snap / "meta.json").read_text())
    meta["target"] = target
    (snap / "meta.json").write_text(json.dumps(meta))
    return snap


def test_printable_escapes_controls_and_keeps_lines():
    from gpunode.errors import printable

    assert printable(f"a{HOSTILE}\nb\tc") == "a\\x1b]0;pwned\\x07\\x1b[2J\\x9b1m\\u202e\nb\tc"


def test_a_gpu_name_with_an_escape_sequence_is_shown_escaped_by_facts(tmp_path):
    done = _cli("facts", "--facts", str(_snapshot(tmp_path, gpu_name=f"NVIDIA H200{HOSTILE}")), cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert "NVIDIA H200\\x1b]0;pwned\\x07\\x1b[2J" in done.stdout
    assert not any(c in done.stdout + done.stderr for c in RAW)


def test_a_snapshot_target_name_with_an_escape_sequence_is_escaped_in_an_error(tmp_path):
    done = _cli("resolve", "--facts", str(_snapshot(tmp_path, target=f"h200{HOSTILE}")), cwd=tmp_path)

    assert done.returncode == 2
    assert "h200\\x1b]0;pwned" in done.stderr
    assert not any(c in done.stdout + done.stderr for c in RAW)


def test_a_config_json_field_with_an_escape_sequence_is_escaped_in_the_plan(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": [f"Qwen3ForCausalLM{HOSTILE}"],
                                                   "model_type": "qwen3", "torch_dtype": "bfloat16"}))
    done = _cli("resolve", "--nvidia-smi", str(X8), "--model", str(model), "--explain", cwd=tmp_path)

    assert "\\x1b]0;pwned" in done.stdout + done.stderr
    assert not any(c in done.stdout + done.stderr for c in RAW)


GOOD = "hosts:\n  lab:\n    address: 127.0.0.1\n    containers:\n      200: {}\ngroups:\n  gpu: {hosts: [lab]}\n"


@pytest.mark.parametrize("folder", ["group_vars/all", "group_vars/gpu", "host_vars/lab"])
def test_a_secret_in_an_ansible_vars_folder_is_read(tmp_path, folder):
    (tmp_path / "hosts.yml").write_text(GOOD)
    (tmp_path / folder).mkdir(parents=True)
    (tmp_path / folder / "vars.yml").write_text("mem_fraction: 0.8\n")
    (tmp_path / folder / "vault.yml").write_text("server_api_key: sk-from-the-vault\n")

    target = inventory.load(tmp_path).target("lab", 200)

    assert target.vars["server_api_key"] == "sk-from-the-vault"
    assert target.vars["mem_fraction"] == 0.8
    assert target.origins["server_api_key"] == f"{tmp_path / folder / 'vault.yml'}:1"
