"""The battery of issue 29: inputs that never end, files that break readers, paths that mean
another folder, secrets under names no role reads, values that look like options.

Each row runs the CLI in its own process (so that a row that hangs is ended at DEADLINE_S and
fails, instead of hanging the suite) in a fresh folder that is also $HOME, and checks what the
user sees: exit code 2, the message naming the file, line, key or value and what to do, no
traceback or internal error, and nothing written under the folder. No row reaches a target:
the inventory's host listens on port 1, and snapshots stand in for probes.

The nvidia-smi and snapshot inputs are recorded outputs (tests/data/nvidia-smi/README.md,
tests/data/snapshots/h200/README.md), edited in one place per row; models are the recorded
config.json of tests/data/models/ (see its README.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_cli_badinput import CONFIG, DATA, GOOD, H200, OFFLINE, PROVISION, SECRET

QWEN3 = (DATA / "models" / "qwen3-vl-8b-instruct" / "config.json").read_text()
DEADLINE_S = 30
PLAN = [*PROVISION[:-1], "--facts", "{d}/snap", "--set", "gpus=[0]", "--set", "tp=1"]  # the 1-GPU snapshot, no model
SMI = ["resolve", "--nvidia-smi", "{d}/smi.txt", "--model", "{d}/model"]
FIFO, ZERO = ("fifo",), ("link", "/dev/zero")
MODEL = {"model/config.json": CONFIG}


def inv(text: str) -> dict:
    return {"inv/hosts.yml": text}


def ct_vars(text: str) -> dict:
    """The good inventory with `text` (a YAML flow mapping body) added to the container's vars."""
    return inv(GOOD.replace("model_source: /mnt/models/m}", f"model_source: /mnt/models/m, {text}}}"))


def host(settings: str) -> dict:
    return inv(f"hosts:\n  lab:\n{settings}")


def bomb(levels: int = 9) -> str:
    """The 'billion laughs' in YAML: 9 anchors, each a list of 9 uses of the one before (~400 bytes)."""
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    names = "abcdefghijklmnop"
    for prev, name in zip(names, names[1:levels], strict=False):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def flow_bomb(levels: int = 9) -> str:
    """The same, as one flow value for --set: [&a [..], &b [*a, ..], ..]."""
    items = ["&a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    names = "abcdefghijklmnop"
    for prev, name in zip(names, names[1:levels], strict=False):
        items.append(f"&{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return "[" + ", ".join(items) + "]"


def deep(n: int = 900) -> str:
    return "[" * n + "]" * n


def snap(**sections: str | tuple) -> dict:
    """The recorded H200 snapshot with sections replaced or added (`name=text`, or `name=(text, rc)`)
    and, for model_* sections, a model path in meta.json."""
    meta = json.loads((H200 / "meta.json").read_text())
    files: dict = {"snap": ("copy", H200)}
    for name, value in sections.items():
        if name == "target":
            meta["target"] = value
            continue
        text, rc = value if isinstance(value, tuple) else (value, 0)
        meta["rc"][name] = rc
        files[f"snap/{name}.txt"] = text
        if name.startswith("model_"):
            meta["model_path"] = "/mnt/models/m"
    files["snap/meta.json"] = json.dumps(meta)
    return files


def model_snap(config: str = CONFIG, **more: str | tuple) -> dict:
    return snap(model_files="1000 ./config.json\n2000000 ./model.safetensors\n", **{"model_config": config, **more})


def query(rows: list[str]) -> dict:
    head = "index, name, memory.total [MiB], compute_cap, pci.bus_id, mig.mode.current, uuid, driver_version\n"
    return snap(nvidia_query=head + "\n".join(rows) + "\n")


def gpu_row(i: int, name: str = "NVIDIA H200", mem: str = "143771", bus: str | None = None) -> str:
    return (f"{i}, {name}, {mem}, 9.0, {bus or f'00000000:{i % 256:02X}:{i // 256:02X}.0'}, Disabled, "
            f"GPU-4519fc1e-5a39-7e66-9346-{i:012d}, 580.159.04")


def header(tensors: dict) -> bytes:
    body = json.dumps(tensors).encode()
    return len(body).to_bytes(8, "little") + body


# (id, files to create, argv, substrings the output must hold)
ROWS = [
    # --- inputs that never end: FIFOs and devices where a file belongs ---------------------------
    ("inventory-file-fifo", {"fifo.yml": FIFO}, [*PROVISION[:2], "{d}/fifo.yml", *PROVISION[3:]],
     ["fifo.yml: YAML file is a named pipe (FIFO), not a regular file"]),
    ("inventory-hosts-yml-fifo", {"inv/hosts.yml": FIFO}, PROVISION, ["hosts.yml: YAML file is a named pipe"]),
    ("inventory-dev-zero", {}, [*PROVISION[:2], "/dev/zero", *PROVISION[3:]],
     ["/dev/zero: ", "is a character device, not a regular file"]),
    ("inventory-dev-stdin", {}, [*PROVISION[:2], "/dev/stdin", *PROVISION[3:]],
     ["/dev/stdin: ", "not a regular file"]),
    ("inventory-link-to-dev-zero", {"z.yml": ZERO}, [*PROVISION[:2], "{d}/z.yml", *PROVISION[3:]],
     ["z.yml: YAML file is a character device"]),
    ("group-vars-fifo", {"inv/group_vars/all.yml": FIFO}, PROVISION, ["group_vars/all.yml: YAML file is a named pipe"]),
    ("host-vars-fifo", {"inv/host_vars/lab.yml": FIFO}, PROVISION, ["host_vars/lab.yml: YAML file is a named pipe"]),
    ("host-vars-dev-zero", {"inv/host_vars/lab.yml": ZERO}, PROVISION, ["host_vars/lab.yml: YAML file is a character"]),
    ("nvidia-smi-fifo", {"smi.txt": FIFO, "model/config.json": CONFIG}, SMI,
     ["smi.txt: nvidia-smi output is a named pipe (FIFO), not a regular file"]),
    ("nvidia-smi-dev-zero", {"smi.txt": ZERO, "model/config.json": CONFIG}, SMI,
     ["smi.txt: nvidia-smi output is a character device"]),
    ("nvidia-smi-sparse-1g", {"smi.txt": ("sparse", 1 << 30), "model/config.json": CONFIG}, SMI,
     ["smi.txt: nvidia-smi output is 1073741824 bytes, too large"]),
    ("snapshot-section-fifo", {**snap(), "snap/os_release.txt": FIFO}, ["facts", "--facts", "{d}/snap"],
     ["os_release.txt: snapshot section is a named pipe"]),
    ("snapshot-section-dev-zero", {**snap(), "snap/glibc.txt": ZERO}, ["facts", "--facts", "{d}/snap"],
     ["glibc.txt: snapshot section is a character device"]),
    ("snapshot-meta-fifo", {**snap(), "snap/meta.json": FIFO}, ["resolve", "--facts", "{d}/snap"],
     ["meta.json: snapshot meta.json is a named pipe"]),
    ("snapshot-section-sparse", {**snap(), "snap/cpus.txt": ("sparse", 100 << 20)}, ["facts", "--facts", "{d}/snap"],
     ["cpus.txt: snapshot section is 104857600 bytes, too large"]),
    ("config-json-fifo", {"model/config.json": FIFO}, OFFLINE, ["config.json: config.json is a named pipe"]),
    ("config-json-sparse", {"model/config.json": ("sparse", 200 << 20)}, OFFLINE,
     ["config.json: config.json is 209715200 bytes, too large"]),
    ("index-json-fifo", {"model/config.json": CONFIG, "model/model.safetensors.index.json": FIFO}, OFFLINE,
     ["model.safetensors.index.json: model.safetensors.index.json is a named pipe"]),
    ("hf-quant-fifo", {"model/config.json": CONFIG, "model/hf_quant_config.json": FIFO}, OFFLINE,
     ["hf_quant_config.json: hf_quant_config.json is a named pipe"]),
    ("safetensors-fifo", {"model/config.json": CONFIG, "model/model.safetensors": FIFO}, OFFLINE,
     ["model.safetensors", "named pipe"]),
    ("pve-token-file-fifo", {"inv/hosts.yml": GOOD.replace("    port: 1\n", "    port: 1\n    vars: {pve_api: "
                                                           "{token_id: 'root@pam!g', token_secret_file: {d}/tok}}\n"),
                             "tok": FIFO},
     ["onboard", "--inventory", "{d}/inv", "--host", "lab", "--ct", "300", "--check"],
     ["tok: token_secret_file is a named pipe"]),
    ("target-config-json-not-regular", model_snap(model_config=("config.json is not a regular file\n", 3)),
     ["resolve", "--facts", "{d}/snap"], ["/mnt/models/m: config.json is not a regular file"]),
    ("target-config-json-too-large", model_snap(model_config=("config.json is 1073741824 bytes\n", 3)),
     ["resolve", "--facts", "{d}/snap"], ["/mnt/models/m: config.json is 1073741824 bytes"]),
    # --- YAML that expands without end, nests too deep, or holds numbers Python will not read ----
    ("alias-bomb-top-vars", inv(GOOD + "vars:\n" + "  " + bomb().replace("\n", "\n  ") + "junk: *i\n"),
     PROVISION, ["hosts.yml:", "YAML expands to more than 1000000 values"]),
    ("alias-bomb-unread-variable", inv(bomb() + GOOD.replace("{model_source: /mnt/models/m}",
                                                            "{model_source: /mnt/models/m, junk: *i}")),
     PROVISION, ["inv/hosts.yml:", "YAML expands to more than 1000000 values", "nest fewer aliases"]),
    ("alias-bomb-group-vars", {"inv/group_vars/all.yml": bomb() + "x: *i\n"}, PROVISION,
     ["group_vars/all.yml:", "YAML expands to more than 1000000"]),
    ("alias-bomb-host-vars", {"inv/host_vars/lab.yml": bomb()}, PROVISION,
     ["host_vars/lab.yml:", "YAML expands to more than 1000000"]),
    ("alias-bomb-set", {}, [*PROVISION, "--set", "junk=" + flow_bomb()], ["--set junk:1: YAML expands"]),
    ("alias-bomb-set-resolve", {}, ["resolve", "--facts", str(H200), "--set", "gpus=" + flow_bomb()],
     ["--set gpus:1: YAML expands"]),
    ("nesting-900-hosts", inv(GOOD + f"vars:\n  junk: {deep()}\n"), PROVISION,
     ["inv/hosts.yml:12: YAML nested more than 64 levels deep"]),
    ("nesting-900-group-vars", {"inv/group_vars/all.yml": f"x: {deep()}\n"}, PROVISION,
     ["group_vars/all.yml:1: YAML nested more than 64 levels"]),
    ("nesting-900-block-style", {"inv/host_vars/lab.yml": "".join(f"{'  ' * i}k{i}:\n" for i in range(900))
                                 + "  " * 900 + "v: 1\n"}, PROVISION,
     ["host_vars/lab.yml:", "YAML nested more than 64 levels"]),
    ("nesting-900-set", {}, [*PROVISION, "--set", f"junk={deep()}"], ["--set junk:1: YAML nested more than 64"]),
    ("list-of-200k-gpus-preview", inv(GOOD.replace("[0, 1, 2, 3, 4, 5, 6, 7]", "[" + "-1, " * 200_000 + "-1]")),
     PROVISION, ["inv/hosts.yml:7", "gpus"]),
    # the anchors inside the one variable: as variables of their own, `a`..`e` are unknown names
    ("list-bomb-in-message", inv(GOOD.replace("{model_source: /mnt/models/m}",
                                              "{model_source: /mnt/models/m, extra_args: {x: " + flow_bomb(5) + "}}")),
     PROVISION, ["extra_args"]),
    ("yaml-5000-digit-port", host("    port: " + "9" * 5000 + "\n"), PROVISION,
     ["inv/hosts.yml: YAML holds a value that cannot be read", "digits"]),
    ("yaml-5000-digit-var", ct_vars("base_port: " + "1" * 5000), PROVISION,
     ["inv/hosts.yml: YAML holds a value that cannot be read"]),
    ("set-5000-digit", {}, [*PROVISION, "--set", "base_port=" + "7" * 5000],
     ["--set base_port: YAML holds a value that cannot be read"]),
    # --- GPU reports that made the recogniser rescan ---------------------------------------------
    ("smi-200k-blank-lines", {"smi.txt": "\n" * 200_000, "model/config.json": CONFIG}, SMI,
     ["smi.txt: no GPU can be read from it"]),
    ("smi-200k-space-lines", {"smi.txt": " \n" * 100_000, "model/config.json": CONFIG}, SMI,
     ["smi.txt: no GPU can be read from it"]),
    ("smi-200k-tab-lines", {"smi.txt": "\t\r\n" * 70_000, "model/config.json": CONFIG}, SMI,
     ["smi.txt: no GPU can be read from it"]),
    ("smi-blank-then-marker", {"smi.txt": "\n" * 100_000 + "CUDA available: True\n", "model/config.json": CONFIG},
     SMI, ["smi.txt: no GPU can be read from it"]),
    ("smi-one-200k-field", {"smi.txt": "index, name\n0, " + "x" * 200_000 + "\n", "model/config.json": CONFIG},
     SMI, ["smi.txt: no GPU can be read from it"]),
    ("smi-200k-field-quoted", {"smi.txt": 'index, name\n"' + "y" * 200_000 + "\n", "model/config.json": CONFIG},
     SMI, ["smi.txt: no GPU can be read from it"]),
    # --- config.json, the index, hf_quant_config.json, a safetensors header: malformed ----------
    ("config-5000-digit-int", {"model/config.json": CONFIG[:-2] + ', "hidden_size": ' + "9" * 5000 + "}"},
     OFFLINE, ["model: config.json is not usable JSON", "digits"]),
    ("config-nan", {"model/config.json": CONFIG[:-2] + ', "hidden_size": NaN}'}, OFFLINE,
     ["config.json: hidden_size nan is out of range; expected a whole number"]),
    ("config-infinity", {"model/config.json": CONFIG[:-2] + ', "max_position_embeddings": -Infinity}'}, OFFLINE,
     ["config.json: max_position_embeddings -inf is out of range"]),
    ("config-nested-100k", {"model/config.json": CONFIG[:-2] + ', "x": ' + deep(100_000) + "}"}, OFFLINE,
     ["config.json is nested too deeply to read"]),
    ("config-layers-a-billion", {"model/config.json": QWEN3.replace('"num_hidden_layers": 36',
                                                                      '"num_hidden_layers": 1000000000')},
     OFFLINE, ["config.json: num_hidden_layers 1000000000 is out of range"]),
    ("config-hidden-negative", {"model/config.json": QWEN3.replace('"hidden_size": 4096', '"hidden_size": -4096')},
     OFFLINE, ["config.json: hidden_size -4096 is out of range"]),
    ("config-vocab-huge", {"model/config.json": QWEN3.replace('"vocab_size": 151936', '"vocab_size": ' + "9" * 4000)},
     OFFLINE, ["config.json: vocab_size"]),
    ("hf-quant-quantization-a-string", {"model/config.json": CONFIG,
                                       "model/hf_quant_config.json": '{"quantization": "fp8"}'},
     OFFLINE, ["hf_quant_config.json: quantization", "expected an object"]),
    ("hf-quant-a-list", {"model/config.json": CONFIG, "model/hf_quant_config.json": '[{"quant_algo": "FP8"}]'},
     OFFLINE, ["hf_quant_config.json holds a JSON list, not an object"]),
    ("hf-quant-nan", {"model/config.json": CONFIG, "model/hf_quant_config.json": '{"quantization": NaN}'},
     OFFLINE, ["hf_quant_config.json: quantization is a float; expected an object"]),
    ("index-metadata-a-list", {"model/config.json": CONFIG, "model/model.safetensors.index.json":
                               '{"metadata": [1, 2], "weight_map": {"a": "model-1.safetensors"}}'},
     OFFLINE, ["model.safetensors.index.json: metadata", "expected an object"]),
    ("index-metadata-total-a-string", {"model/config.json": CONFIG, "model/model.safetensors.index.json":
                                       '{"metadata": {"total_size": "' + "9" * 5000 + '"}, "weight_map": {}}'},
     OFFLINE, ["model.safetensors.index.json: metadata.total_size", "expected a whole number"]),
    ("index-weight-map-a-list", {"model/config.json": CONFIG, "model/model.safetensors.index.json":
                                 '{"weight_map": ["model-1.safetensors"]}'},
     OFFLINE, ["model.safetensors.index.json has no weight_map object"]),
    ("index-weight-map-values-lists", {"model/config.json": CONFIG, "model/model.safetensors.index.json":
                                       '{"weight_map": {"a": ["x.safetensors"]}}'},
     OFFLINE, ["model.safetensors.index.json: weight_map", "expected a file name"]),
    ("safetensors-shape-strings", {"model/config.json": CONFIG, "model/model.safetensors":
                                   header({"w": {"dtype": "BF16", "shape": ["4096", "x"], "data_offsets": [0, 0]}})},
     OFFLINE, ["model.safetensors: header: tensor 'w': shape", "expected a list of whole numbers"]),
    ("safetensors-shape-an-int", {"model/config.json": CONFIG, "model/model.safetensors":
                                  header({"w": {"dtype": "BF16", "shape": 4096, "data_offsets": [0, 0]}})},
     OFFLINE, ["model.safetensors: header: tensor 'w': shape"]),
    ("safetensors-shape-floats", {"model/config.json": CONFIG, "model/model.safetensors":
                                  header({"w": {"dtype": "BF16", "shape": [1.5, 2], "data_offsets": [0, 0]}})},
     OFFLINE, ["model.safetensors: header: tensor 'w': shape"]),
    ("safetensors-header-a-list", {"model/config.json": CONFIG, "model/model.safetensors": header([1, 2])},
     OFFLINE, ["model.safetensors: header holds a JSON list, not an object"]),
    ("safetensors-header-length-past-file", {"model/config.json": CONFIG,
                                             "model/model.safetensors": (1000).to_bytes(8, "little") + b"{}"},
     OFFLINE, ["model.safetensors: header", "bytes long but the file"]),
    ("model-file-name-newline", {"model/config.json": CONFIG, "model/shard\nevil.safetensors": b"x"}, OFFLINE,
     ["shard\\nevil.safetensors", "holds a line break"]),
    ("model-file-name-escape", {"model/config.json": CONFIG, "model/a\x1b[2Jb.safetensors": b"x"}, OFFLINE,
     ["a\\x1b[2Jb.safetensors", "control character"]),
    ("model-file-name-not-utf8", {"model/config.json": CONFIG, b"model/\xff.safetensors": b"x"}, OFFLINE,
     ["\\udcff.safetensors", "not UTF-8"]),
    # the same files as the target's probe returns them (a snapshot with model sections)
    ("target-config-5000-digit", model_snap(CONFIG[:-2] + ', "hidden_size": ' + "9" * 5000 + "}"),
     ["resolve", "--facts", "{d}/snap"], ["/mnt/models/m: config.json is not usable JSON"]),
    ("target-config-nan", model_snap(CONFIG[:-2] + ', "hidden_size": NaN}'), ["resolve", "--facts", "{d}/snap"],
     ["/mnt/models/m: config.json: hidden_size nan is out of range"]),
    ("target-hf-quant-string", model_snap(model_quant='{"quantization": "fp8"}'), ["resolve", "--facts", "{d}/snap"],
     ["hf_quant_config.json: quantization", "expected an object"]),
    ("target-index-metadata-list", model_snap(model_index='{"metadata": [], "weight_map": {"a": "m.safetensors"}}'),
     ["resolve", "--facts", "{d}/snap"], ["model.safetensors.index.json: metadata", "expected an object"]),
    ("target-header-shape-strings", model_snap(model_header=json.dumps({"w": {"shape": ["a"]}})),
     ["resolve", "--facts", "{d}/snap"], ["header: tensor 'w': shape"]),
    ("target-file-name-newline", snap(model_files="1000 ./config.json\n5 ./shard\nevil.safetensors\n",
                                      model_config=CONFIG), ["resolve", "--facts", "{d}/snap"],
     ["holds a line break", "evil.safetensors"]),
    ("target-layers-a-billion", model_snap(QWEN3.replace('"num_hidden_layers": 36', '"num_hidden_layers": 10**9'
                                                         .replace("10**9", "1000000000"))),
     ["resolve", "--facts", "{d}/snap"], ["num_hidden_layers 1000000000 is out of range"]),
    # --- values that ended in an internal error -------------------------------------------------
    ("set-python-abc", MODEL, [*OFFLINE, "--set", "python=abc"], ["variable python='abc'", "e.g. 3.12"]),
    ("set-python-3-x", MODEL, [*OFFLINE, "--set", "python=3.x"], ["variable python='3.x'"]),
    ("set-python-empty-part", MODEL, [*OFFLINE, "--set", "python=3."], ["variable python='3.'"]),
    ("set-python-a-list", MODEL, [*OFFLINE, "--set", "python=[3, 12]"], ["variable python='[3, 12]'"]),
    ("plan-set-python-abc", {**snap(), **MODEL}, [*PLAN, "--set", "python=abc", "--set", "model_path={d}/model"],
     ["variable python='abc'"]),
    ("set-engine-version-list", MODEL, [*OFFLINE, "--set", "engine_version=[1]"], ["engine_version: [1]"]),
    ("address-host-port", host("    address: 10.0.0.5:22\n"), PROVISION,
     ["inv/hosts.yml:3: address of host lab", "port: 22"]),
    ("address-ipv6-port", host("    address: '[::1]:22'\n"), PROVISION, ["inv/hosts.yml:3: address of host lab"]),
    ("address-with-user", host("    address: root@10.0.0.5\n"), PROVISION,
     ["inv/hosts.yml:3: address of host lab", "user:"]),
    ("address-url", host("    address: ssh://10.0.0.5\n"), PROVISION, ["inv/hosts.yml:3: address of host lab"]),
    ("facts-save-under-proc", {**snap()}, ["facts", "--facts", "{d}/snap", "--save", "/proc/gpunode-snap"],
     ["cannot save a snapshot to /proc/gpunode-snap"]),
    ("facts-save-under-a-file", {**snap(), "afile": "x"}, ["facts", "--facts", "{d}/snap", "--save", "{d}/afile/s"],
     ["cannot save a snapshot to", "afile/s", "is a file"]),
    ("facts-save-onto-dev-null", {**snap()}, ["facts", "--facts", "{d}/snap", "--save", "/dev/null"],
     ["cannot save a snapshot to /dev/null"]),
    ("facts-save-onto-a-file", {**snap(), "afile": "x"}, ["facts", "--facts", "{d}/snap", "--save", "{d}/afile"],
     ["cannot save a snapshot to", "it is a file, not a folder"]),
    ("host-name-lone-surrogate", {}, [*PROVISION[:4], "lab\udcff", *PROVISION[5:]],
     ["unknown host 'lab\\udcff'"]),
    ("inventory-name-lone-surrogate", host('    containers:\n      200: {vars: {served_model_name: "a\\udc80"}}\n'),
     PROVISION, ["inv/hosts.yml:4: YAML syntax error: found invalid Unicode character escape code"]),
    ("snapshot-target-lone-surrogate", snap(target="h\udc80"), ["facts", "--facts", "{d}/snap"],
     ["snap/meta.json: target", "not valid Unicode"]),
    ("set-lone-surrogate", {}, [*PROVISION, "--set", "served_model_name=m\udcff"],
     ["served_model_name", "not valid Unicode"]),
    ("inventory-empty-path", {}, [*PROVISION[:2], "", *PROVISION[3:]], ["--inventory is empty"]),
    ("only-a-comma", {**snap()}, [*PLAN, "--only", ","], ["--only ',' names no role"]),
    ("only-unknown-role", {**snap()}, [*PLAN, "--only", "engine,wieghts"], ["--only: unknown role 'wieghts'"]),
    # --- paths that mean another folder, or that systemd would read as its own syntax -----------
    ("model-source-dotdot", {}, [*PROVISION, "--set", "model_source=/mnt/lab/models/tiny-qwen3/.."],
     ["variable model_source='/mnt/lab/models/tiny-qwen3/..'", "has a '.' or '..' part", "(/mnt/lab/models)"]),
    ("model-source-dot", {}, [*PROVISION, "--set", "model_source=/mnt/models/m/."], ["(/mnt/models/m)"]),
    ("model-source-root", {}, [*PROVISION, "--set", "model_source=/"], ["model_source='/'", "is the root folder /"]),
    ("model-source-double-slash", {}, [*PROVISION, "--set", "model_source=//"], ["is the root folder /"]),
    ("model-source-dotdot-inventory", inv(GOOD.replace("/mnt/models/m}", "/mnt/models/m/../..}")), PROVISION,
     ["inv/hosts.yml:8", "has a '.' or '..' part"]),
    ("model-source-dot-middle", {}, [*PROVISION, "--set", "model_source=/mnt/./models/m"], ["has a '.' or '..' part"]),
    ("weights-dest-escape", {}, [*PROVISION, "--set", "weights_dest_root=/dev/shm/../../etc"],
     ["weights_dest_root", "(/etc)"]),
    ("venv-root-dollar", {}, [*PROVISION, "--set", "venv_root=/opt/$HOME/venvs"], ["venv_root", "holds $"]),
    ("venv-root-double-quote", {}, [*PROVISION, "--set", 'venv_root=/opt/a"b'], ["venv_root", 'holds "']),
    ("venv-root-single-quote", {}, [*PROVISION, "--set", "venv_root=/opt/it's"], ["venv_root", "holds '"]),
    ("venv-root-backtick", {}, [*PROVISION, "--set", "venv_root=/opt/`id`"], ["venv_root", "holds `"]),
    ("venv-root-backslash", {}, [*PROVISION, "--set", "venv_root=/opt/a\\b"], ["venv_root", "backslash"]),
    ("venv-root-dotdot-inventory", ct_vars("venv_root: /opt/gpunode/../../tmp"), PROVISION,
     ["venv_root", "inv/hosts.yml:8", "(/tmp)"]),
    ("wheelhouse-dotdot", {}, [*PROVISION, "--set", "wheelhouse=/srv/wh/.."], ["wheelhouse", "(/srv)"]),
    # --- secrets that were silently dropped -----------------------------------------------------
    ("secret-misspelled-set", {}, [*PROVISION, "--set", f"server_apikey={SECRET}"],
     ["server_apikey", "looks like a secret", "server_api_key"]),
    ("secret-misspelled-inventory", ct_vars(f"server_api_kye: {SECRET}"), PROVISION,
     ["server_api_kye", "inv/hosts.yml:8", "looks like a secret"]),
    ("secret-unknown-hf-token", {"inv/group_vars/all.yml": f"hf_token: {SECRET}\n"}, PROVISION,
     ["hf_token", "group_vars/all.yml:1", "looks like a secret"]),
    ("secret-unknown-upper", {"inv/host_vars/lab.yml": f"SERVER_API_KEY: {SECRET}\n"}, PROVISION,
     ["SERVER_API_KEY", "host_vars/lab.yml:1", "looks like a secret"]),
    ("secret-in-vault-folder-misspelled", {"inv/group_vars/all/vault.yml": f"server_api_keey: {SECRET}\n"},
     PROVISION, ["server_api_keey", "group_vars/all/vault.yml:1", "looks like a secret"]),
    ("secret-in-host-vars-folder-misspelled", {"inv/host_vars/lab/vault.yml": f"vault_api_key: {SECRET}\n"},
     PROVISION, ["vault_api_key", "host_vars/lab/vault.yml:1"]),
    ("group-vars-folder-unknown-group", {"inv/group_vars/gpus/vars.yml": "mem_fraction: 0.9\n"}, PROVISION,
     ["group_vars/gpus", "unknown group 'gpus'"]),
    ("group-vars-folder-other-file", {"inv/group_vars/all/notes.txt": "x\n"}, PROVISION,
     ["group_vars/all/notes.txt", "not a YAML file"]),
    ("group-vars-nested-folder", {"inv/group_vars/all/more/x.yml": "a: 1\n"}, PROVISION,
     ["group_vars/all/more", "folder"]),
    ("group-vars-folder-and-file-both", {"inv/group_vars/all.yml": "mem_fraction: 0.8\n",
                                         "inv/group_vars/all/vars.yml": "mem_fraction: 0.9\n"}, PROVISION,
     ["group_vars/all", "mem_fraction", "both"]),
    # --- values that would become options, or were silently accepted (the Low items) ---
    ("router-policy-an-option", {}, [*PROVISION, "--set", "router_policy=--evil"],
     ["variable router_policy='--evil'", "starts with -"]),
    ("served-model-name-an-option", {}, [*PROVISION, "--set", "served_model_name=--model-path"],
     ["variable served_model_name='--model-path'", "starts with -"]),
    ("base-uv-requirement-an-option", {}, [*PROVISION, "--set", "base_uv_requirement=--index-url=http://x"],
     ["base_uv_requirement", "starts with -"]),
    ("router-host-an-option", {}, [*PROVISION, "--set", "router_host=-oProxyCommand=x"],
     ["variable router_host='-oProxyCommand=x'", "starts with -"]),
    ("bind-host-an-option", ct_vars("host: --help"), PROVISION, ["variable host='--help'", "inv/hosts.yml:8"]),
    ("secret-in-a-plain-variable", ct_vars("server_api_key: sk-lab-Zq81xVn3, served_model_name: m-sk-lab-Zq81xVn3"),
     PROVISION, ["variable served_model_name", "inv/hosts.yml", "value of a secret", "server_api_key"]),
    ("slot-cores-with-a-word", {}, ["resolve", "--facts", str(H200), "--set", "slot_cores=0,x,1"],
     ["variable slot_cores='0,x,1'"]),
    ("slot-cores-negative", {}, ["resolve", "--facts", str(H200), "--set", "slot_cores=[-1]"],
     ["variable slot_cores"]),
    # --- names no role, the resolver or the facts probe reads (issue 33's registry) ------------
    ("unknown-set-provision", {}, [*PROVISION, "--set", "mem_fractoin=0.9"],
     ["variable mem_fractoin (from --set) is not one gpunode knows", "did you mean mem_fraction?"]),
    ("unknown-set-resolve", {}, ["resolve", "--facts", str(H200), "--set", "engnie=vllm"],
     ["variable engnie (from --set) is not one gpunode knows", "did you mean engine?"]),
    ("unknown-set-facts", {}, ["facts", "--inventory", "{d}/inv", "--host", "lab", "--ct", "200", "--set", "venvv=/x"],
     ["variable venvv (from --set)", "did you mean venv?"]),
    ("unknown-vars-file", {"v.yml": "mem_fraction: 0.9\nengnie: vllm\n"}, [*PROVISION, "-e", "@{d}/v.yml"],
     ["variable engnie (from ", "v.yml:2)", "did you mean engine?"]),
    ("unknown-container-vars", ct_vars("mem_fractoin: 0.9"), PROVISION,
     ["variable mem_fractoin (from ", "inv/hosts.yml:8)", "did you mean mem_fraction?"]),
    ("unknown-top-vars", inv(GOOD + "vars:\n  model_nmae: Qwen3\n"), PROVISION,
     ["variable model_nmae (from ", "inv/hosts.yml:12)", "did you mean model_name?"]),
    ("unknown-group-vars", {"inv/group_vars/gpu.yml": "mem_fraction: 0.9\nengnie: vllm\n"}, PROVISION,
     ["variable engnie (from ", "inv/group_vars/gpu.yml:2)", "did you mean engine?"]),
    ("unknown-host-vars-resolve", {"inv/host_vars/lab.yml": "model_sorce: /mnt/m\n"},
     ["resolve", "--inventory", "{d}/inv", "--host", "lab", "--ct", "200"],
     ["variable model_sorce (from ", "inv/host_vars/lab.yml:1)", "did you mean model_source?"]),
    ("unknown-host-vars-facts", {"inv/host_vars/lab.yml": "venvv: /opt/v\n"},
     ["facts", "--inventory", "{d}/inv", "--host", "lab", "--ct", "200"],
     ["variable venvv (from ", "inv/host_vars/lab.yml:1)", "did you mean venv?"]),
    ("unknown-ini-group-vars", {"ini/hosts": "[gpu]\nlab ansible_host=127.0.0.1 ansible_port=1 "
                                "containers=\"{200: {}}\"\n\n[gpu:vars]\nmodel_source=/mnt/m\nsevred_model_name=q\n"},
     [*PROVISION[:2], "{d}/ini/hosts", *PROVISION[3:]],
     ["variable sevred_model_name (from ", "ini/hosts:6)", "did you mean served_model_name?"]),
    ("unknown-ansible-host-var", {"a/hosts.yml": "all:\n  hosts:\n    lab:\n      ansible_host: 127.0.0.1\n"
                                  "      ansible_port: 1\n      containers: {200: {}}\n      wieghts_stage: false\n"},
     [*PROVISION[:2], "{d}/a/hosts.yml", *PROVISION[3:]],
     ["variable wieghts_stage (from ", "a/hosts.yml:7)", "did you mean weights_stage?"]),
    ("unknown-host-var-onboard", {"inv/host_vars/lab.yml": "pve_apii: {token_id: 'root@pam!g'}\n"},
     ["onboard", "--inventory", "{d}/inv", "--host", "lab", "--ct", "300", "--check"],
     ["variable pve_apii (from ", "inv/host_vars/lab.yml:1)", "did you mean pve_api?"]),
    # --- a bad value is named at the file and line that set it, group_vars included -------------
    ("group-vars-bad-value-own-line", {"inv/hosts.yml": GOOD.replace("gpu: {hosts: [lab]}",
                                                                     "gpu: {hosts: [lab], vars: {engine: vllm}}"),
                                       "inv/group_vars/gpu.yml": "mem_fraction: 0.9\nbase_port: x\n"}, PROVISION,
     ["variable base_port='x' (from ", "inv/group_vars/gpu.yml:2)", "fix base_port at "]),
    ("group-vars-resolver-value", {"inv/group_vars/gpu.yml": "engine: vlm\n"}, PROVISION,
     ["variable engine='vlm' (from ", "inv/group_vars/gpu.yml:1)", "'sglang', 'vllm', 'vllm-cpu'"]),
    ("group-vars-mem-fraction-inline-and-file", {"inv/hosts.yml": GOOD.replace(
        "gpu: {hosts: [lab]}", "gpu: {hosts: [lab], vars: {mem_fraction: 1.5}}"),
        "inv/group_vars/gpu.yml": "engine: vllm\n"}, PROVISION,
     ["variable mem_fraction=1.5 (from ", "inv/hosts.yml:10)", "between 0 and 1"]),
    ("ini-group-vars-bad-value", {"ini/hosts": "[gpu]\nlab ansible_host=127.0.0.1 ansible_port=1 "
                                  "containers=\"{200: {}}\"\n\n[gpu:vars]\nmodel_source=/mnt/m\nrouter_port=0\n"},
     [*PROVISION[:2], "{d}/ini/hosts", *PROVISION[3:]], ["variable router_port=0 (from ", "ini/hosts:6)"]),
    ("gpus-10000", query([gpu_row(i) for i in range(10_000)]), ["resolve", "--facts", "{d}/snap"],
     ["nvidia_query (nvidia-smi --query-gpu): it lists 10000 GPUs"]),
    ("gpus-index-0-twice", query([gpu_row(0), gpu_row(0, bus="00000000:07:00.0")]), ["resolve", "--facts", "{d}/snap"],
     ["nvidia_query (nvidia-smi --query-gpu): it lists GPU index 0 twice"]),
    ("gpu-memory-negative", query([gpu_row(0, mem="-143771")]), ["resolve", "--facts", "{d}/snap"],
     ["nvidia_query (nvidia-smi --query-gpu): GPU index 0 has memory -143771"]),
    ("gpu-index-negative", query([gpu_row(0).replace("0, ", "-1, ", 1)]), ["resolve", "--facts", "{d}/snap"],
     ["nvidia_query (nvidia-smi --query-gpu): GPU index -1"]),
]


def _make(root: Path, files: dict) -> None:
    (root / "inv").mkdir()
    (root / "inv" / "hosts.yml").write_text(GOOD)
    (root / "home").mkdir()
    for rel, content in files.items():
        path = root / (os.fsdecode(rel) if isinstance(rel, bytes) else rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.is_file():
            path.unlink()
        if content == FIFO:
            os.mkfifo(path)
        elif isinstance(content, tuple) and content[0] == "link":
            path.symlink_to(content[1])
        elif isinstance(content, tuple) and content[0] == "sparse":
            with open(path, "wb") as f:
                f.truncate(content[1])
        elif isinstance(content, tuple) and content[0] == "copy":
            (shutil.copytree if Path(content[1]).is_dir() else shutil.copyfile)(content[1], path)
        else:
            text = content.replace("{d}", str(root)) if isinstance(content, str) else content
            if isinstance(text, str):
                path.write_text(text, errors="surrogatepass")
            else:
                path.write_bytes(text)


def _tree(root: Path) -> dict[str, object]:
    """Every path under root with its size (or link target), mode and mtime: what 'nothing written'
    compares (a FIFO is never opened, a sparse file never read)."""
    out: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        out[str(path.relative_to(root))] = (os.readlink(path) if path.is_symlink() else st.st_size,
                                            st.st_mode, st.st_mtime_ns)
    return out


def run_cli(argv: list[str], cwd: Path) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("GPUNODE_INVENTORY", "GPUNODE_DEBUG", "PVE_TOKEN_SECRET")}
    env.update(HOME=str(cwd / "home"), XDG_CACHE_HOME=str(cwd.with_name(cwd.name + "-cache")), PYTHONUTF8="1")
    code = "import sys; from gpunode.cli.main import main; main(['gpunode', *sys.argv[1:]])"
    try:
        proc = subprocess.run([sys.executable, "-c", code, *map(os.fsencode, argv)], cwd=cwd, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"no answer within {DEADLINE_S} s (a hang)")
    return proc.returncode, (proc.stdout + proc.stderr).decode("utf-8", "backslashreplace")


def test_the_table_has_over_100_rows_with_distinct_names():
    assert len(ROWS) > 100 and len({r[0] for r in ROWS}) == len(ROWS)


@pytest.mark.parametrize("files,argv,expected", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_bad_input_exits_2_naming_it_in_time_and_writes_nothing(files, argv, expected, tmp_path):
    refused_cleanly(files, argv, expected, tmp_path)


def refused_cleanly(files: dict, argv: list[str], expected: list[str], tmp_path: Path) -> None:
    """What every bad-input row must show (issue 41's batteries share it): exit 2 naming the input with a
    hint, no traceback, a short message without the secret, and no file written or changed."""
    _make(tmp_path, files)
    before = _tree(tmp_path)

    code, output = run_cli([a.replace("{d}", str(tmp_path)) for a in argv], tmp_path)

    assert "Traceback" not in output and "internal error" not in output, output[-3000:]
    assert code == 2, output[-3000:]
    for text in expected:
        assert text in output, output[-3000:]
    assert "hint:" in output, "the message says what to do"
    assert len(output) < 4000, "an error message quotes at most a preview of a value"
    assert SECRET not in output
    assert _tree(tmp_path) == before, "the failed run wrote or changed files"
