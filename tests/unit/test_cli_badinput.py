"""The battery of issue 12: bad inputs a careless or hostile user gives the CLI.

Each row runs the real CLI entry (gpunode.cli.main.main, the same task tree
`inv` runs) in a fresh folder and checks what the user sees: exit code 2, a
message naming the file, line, key or value, no traceback (and no internal
error report), a secret given in the input never echoed, and nothing written
anywhere under the folder (which is also $HOME). No row reaches a target: the
inventory's host listens on port 1, where nothing answers, so a row that got
past its check would fail with "cannot reach" instead of its expected message.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode.inventory import load

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
H200 = DATA / "snapshots" / "h200"          # recorded: see its README.md
X8 = DATA / "nvidia-smi" / "rtx-pro-6000-x8"  # recorded: see tests/data/nvidia-smi/README.md
SECRET = "hf_s3cr3tTOKENvalue"

GOOD = """\
hosts:
  lab:
    address: 127.0.0.1
    port: 1
    containers:
      200:
        gpus: [0, 1, 2, 3, 4, 5, 6, 7]
        vars: {model_source: /mnt/models/m}
groups:
  gpu: {hosts: [lab]}
"""
CONFIG = '{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "torch_dtype": "bfloat16"}\n'
PROVISION = ["provision", "--inventory", "{d}/inv", "--host", "lab", "--ct", "200", "--check"]
OFFLINE = ["resolve", "--nvidia-smi", f"{X8}/nvidia-smi.txt", "--model", "{d}/model"]


def inv(text: str) -> dict:
    return {"inv/hosts.yml": text}


def host(settings: str) -> dict:
    return inv(f"hosts:\n  lab:\n{settings}")


# (id, files to create, argv, substrings the output must hold)
ROWS = [
    # --- arguments -------------------------------------------------------------------------
    ("ct-not-a-number", {}, [*PROVISION[:-3], "--ct", "abc"], ["--ct 'abc' is not a whole number"]),
    ("ct-float", {}, [*PROVISION[:-3], "--ct", "200.7"], ["--ct '200.7'"]),
    ("onboard-ct", {}, ["onboard", "--inventory", "{d}/inv", "--host", "lab", "--ct", "abc", "--check"],
     ["--ct 'abc'"]),
    ("onboard-cores", {}, ["onboard", "--inventory", "{d}/inv", "--host", "lab", "--ct", "300", "--cores", "abc"],
     ["--cores 'abc'"]),
    ("onboard-memory", {}, ["onboard", "--inventory", "{d}/inv", "--host", "lab", "--ct", "300", "--memory", "1e3"],
     ["--memory '1e3'"]),
    ("onboard-gpus", {}, ["onboard", "--inventory", "{d}/inv", "--host", "lab", "--ct", "300", "--gpus", "0,-1"],
     ["--gpus '0,-1'"]),
    ("forks", {}, [*PROVISION, "--forks", "many"], ["--forks 'many'"]),
    ("set-unclosed-list", {}, [*PROVISION, "--set", "gpus=[1"], ["--set gpus=...: the value is not valid YAML"]),
    ("set-secret-not-echoed", {}, [*PROVISION, "--set", "hf_token={" + SECRET],
     ["--set hf_token=...: the value is not valid YAML"]),
    ("set-secret-bad-tag", {}, [*PROVISION, "--set", f"hf_token=!{SECRET} x"], ["--set hf_token=..."]),
    ("set-not-a-name", {}, [*PROVISION, "--set", "a b=1"], ["'a b' is not a variable name"]),
    ("extra-args-unclosed-quote", {}, ["resolve", "--facts", str(H200), "--set", f'extra_args=--api-key "{SECRET}'],
     ["variable extra_args=... (from --set) cannot be split", "No closing quotation"]),
    ("extra-args-unclosed-quote-inventory",
     inv(GOOD.replace("model_source: /mnt/models/m", f"model_source: /mnt/models/m, extra_args: \"--k '{SECRET}\"")),
     PROVISION, ["extra_args", "inv/hosts.yml:8", "No closing quotation"]),
    # --- files that are not text -------------------------------------------------------------
    ("inventory-binary", {"inv/hosts.yml": b"hosts:\n  lab: {}\x00\x7fELF"}, PROVISION,
     ["inv/hosts.yml: YAML file is binary (a NUL byte at offset 16, line 2)"]),
    ("inventory-latin1", {"inv/hosts.yml": "hosts:\n  lab: {address: caf\u00e9}\n".encode("latin-1")}, PROVISION,
     ["inv/hosts.yml: YAML file is not UTF-8 text (byte 0xe9 at offset 27, line 2)"]),
    ("host-vars-binary", {"inv/host_vars/lab.yml": b"\x89PNG\r\n\x1a\n\x00"}, PROVISION,
     ["host_vars/lab.yml: YAML file is binary"]),
    ("nvidia-smi-binary", {"smi.txt": b"\x7fELF\x02\x01\x01\x00", "model/config.json": CONFIG},
     ["resolve", "--nvidia-smi", "{d}/smi.txt", "--model", "{d}/model"],
     ["smi.txt: nvidia-smi output is binary (a NUL byte at offset 7"]),
    ("nvidia-smi-latin1", {"smi.txt": "NVIDIA-SMI 580 \u00b0C\n".encode("latin-1"), "model/config.json": CONFIG},
     ["resolve", "--nvidia-smi", "{d}/smi.txt", "--model", "{d}/model"],
     ["smi.txt: nvidia-smi output is not UTF-8 text (byte 0xb0 at offset 15, line 1)"]),
    ("nvidia-smi-utf16", {"smi.txt": "NVIDIA-SMI\r\n".encode("utf-16"), "model/config.json": CONFIG},
     ["resolve", "--nvidia-smi", "{d}/smi.txt", "--model", "{d}/model"], ["smi.txt: nvidia-smi output is"]),
    ("config-json-binary", {"model/config.json": b"\x00\x01{}"}, OFFLINE,
     ["model/config.json: config.json is binary (a NUL byte at offset 0"]),
    ("config-json-latin1", {"model/config.json": '{"model_type": "caf\u00e9"}'.encode("latin-1")}, OFFLINE,
     ["model/config.json: config.json is not UTF-8 text (byte 0xe9"]),
    ("safetensors-header-binary", {"model/config.json": CONFIG,
                                   "model/model.safetensors": (4).to_bytes(8, "little") + b"\xff\xfe{}"},
     OFFLINE, ["model.safetensors: safetensors header is not UTF-8 text (byte 0xff at offset 0"]),
    ("model-dangling-symlink", {"model/config.json": CONFIG, "model/model-00001-of-00002.safetensors":
                                ("link", "/nonexistent/shard")},
     OFFLINE, ["model-00001-of-00002.safetensors: cannot read it: a symbolic link to /nonexistent/shard"]),
    ("snapshot-section-binary", {"snap": ("copy", H200), "snap/os_release.txt": b"ID=debian\x00"},
     ["facts", "--facts", "{d}/snap"], ["snap/os_release.txt: snapshot section is binary"]),
    ("snapshot-meta-latin1", {"snap": ("copy", H200), "snap/meta.json": b'{"target": "caf\xe9"}'},
     ["facts", "--facts", "{d}/snap"], ["snap/meta.json: snapshot meta.json is not UTF-8 text"]),
    ("snapshot-meta-list", {"snap": ("copy", H200), "snap/meta.json": "[1, 2]\n"},
     ["resolve", "--facts", "{d}/snap"], ["snap/meta.json: expected a JSON object", "got a list"]),
    ("snapshot-meta-rc-list", {"snap": ("copy", H200), "snap/meta.json": '{"format": 1, "rc": [0]}'},
     ["facts", "--facts", "{d}/snap"], ["snap/meta.json: rc must map each section"]),
    ("pve-token-file-binary", {"inv/hosts.yml": GOOD.replace("    port: 1\n", "    port: 1\n    vars: {pve_api: "
                                                             "{token_id: 'root@pam!g', token_secret_file: {d}/tok}}\n"),
                               "tok": b"\xff\x00"},
     ["onboard", "--inventory", "{d}/inv", "--host", "lab", "--ct", "300", "--check"],
     ["token_secret_file", "tok: token_secret_file is binary"]),
    # --- inventory shapes and types ----------------------------------------------------------
    ("container-as-list-item", host("    containers:\n      - 200: {gpus: [0]}\n"), PROVISION,
     ["inv/hosts.yml:4: container of host lab written as a list item"]),
    ("groups-as-list", inv("hosts:\n  lab: {}\ngroups:\n  - lab\n"), PROVISION,
     ["inv/hosts.yml:3: `groups` must be a mapping"]),
    ("group-hosts-a-string", inv("hosts:\n  lab: {}\ngroups:\n  gpu: {hosts: lab}\n"), PROVISION,
     ["inv/hosts.yml:4: hosts of group gpu must be a list of host names, got 'lab'"]),
    ("group-vars-file-typo", {"inv/group_vars/gpus.yml": "mem_fraction: 0.9\n"}, PROVISION,
     ["group_vars/gpus.yml is for unknown group 'gpus'", "did you mean 'gpu'?"]),
    ("known-hosts-a-number", host("    known_hosts: 5\n"), PROVISION,
     ["inv/hosts.yml:3: known_hosts of lab must be a file path or a list of them, got 5"]),
    ("address-300-characters", host(f"    address: {'a' * 300}\n"), PROVISION,
     ["inv/hosts.yml:3: address of host lab is not a host name or IP address", "(300 characters)"]),
    ("address-like-an-option", host("    address: -oProxyCommand=touch\n"), PROVISION,
     ["inv/hosts.yml:3: address of host lab"]),
    ("user-with-space", host("    user: root now\n"), PROVISION, ["inv/hosts.yml:3: user of host lab is not valid"]),
    ("port-yes", host("    port: yes\n"), PROVISION,
     ["inv/hosts.yml:3: port of host lab must be 1-65535, got True (YAML reads yes/no"]),
    ("port-float", host("    port: 22.0\n"), PROVISION, ["inv/hosts.yml:3: port of host lab must be 1-65535"]),
    ("vmid-float", host("    containers:\n      200.7: {}\n"), PROVISION,
     ["inv/hosts.yml:4: container id 200.7 of host lab is not a whole number"]),
    ("vmid-bool", host("    containers:\n      yes: {}\n"), PROVISION, ["inv/hosts.yml:4: container id True"]),
    ("container-gpus-bool-negative", host("    containers:\n      200: {gpus: [true, -1]}\n"), PROVISION,
     ["inv/hosts.yml:4: gpus of container 200 must be a list of distinct GPU indices", "[True, -1]"]),
    # --- Ansible inventories --------------------------------------------------------------------
    ("ansible-childen-typo", inv("all:\n  childen:\n    gpu: {hosts: {lab: }}\n"), PROVISION,
     ["inv/hosts.yml:2: unknown key 'childen' in group all", "did you mean 'children'?"]),
    ("ansible-password", inv("all:\n  hosts:\n    lab: {ansible_host: 127.0.0.1, ansible_password: " + SECRET + "}\n"),
     PROVISION, ["inv/hosts.yml:3: ansible_password of host lab: gpunode reads no password from the inventory"]),
    ("ansible-group-ssh-args", inv("all:\n  vars:\n    ansible_ssh_common_args: -J jump\n  hosts: {lab: }\n"),
     PROVISION, ["inv/hosts.yml:3: ansible_ssh_common_args of group all has no equivalent"]),
    ("ansible-groups-disagree", inv("all:\n  children:\n    a: {vars: {ansible_user: x}, hosts: {lab: }}\n"
                                    "    b: {vars: {ansible_user: y}, hosts: {lab: }}\n"), PROVISION,
     ["inv/hosts.yml:4: host lab gets user 'y' from group b but 'x' from group a (line 3)"]),
    ("ansible-port-yes", inv("all:\n  vars: {ansible_port: yes}\n  hosts: {lab: }\n"), PROVISION,
     ["inv/hosts.yml:2: port of host lab must be 1-65535, got True"]),
    # --- role variables (the helper "units" typed them; here they go through the CLI) -------------
    ("set-gpus-bool-negative", {}, [*PROVISION, "--set", "gpus=[true, -1]"], ["variable gpus=", "--set"]),
    ("set-gpus-with-a-word", {}, [*PROVISION, "--set", "gpus=0,x,1"], ["variable gpus='0,x,1'"]),
    ("resolve-set-gpus-with-a-word", {}, ["resolve", "--facts", str(H200), "--set", "gpus=0,x,1"],
     ["variable gpus='0,x,1' (from --set)"]),
    # --- model files the helper "resolver" checks (landed on main), through the CLI ----------------
    ("config-json-empty", {"model/config.json": ""}, OFFLINE, ["model: config.json is empty"]),
    ("config-json-broken", {"model/config.json": '{"architectures": '}, OFFLINE,
     ["model: config.json is not valid JSON"]),
    ("index-json-broken", {"model/config.json": CONFIG, "model/model.safetensors.index.json": '{"weight_map": '},
     OFFLINE, ["model: model.safetensors.index.json is not valid JSON"]),
    ("base-port-past-65535", {"snap": ("copy", H200), "snap/nvidia_query.txt": ("copy", X8 / "query-gpu.csv"),
                              "snap/nvidia_smi.txt": ("copy", X8 / "nvidia-smi.txt")},
     [*PROVISION[:-1], "--facts", "{d}/snap", "--set", "tp=1", "--set", "base_port=65535"],
     ["base_port=65535 gives 8 servers the ports 65535..65542"]),
]


def _make(root: Path, files: dict) -> None:
    (root / "inv").mkdir()
    (root / "inv" / "hosts.yml").write_text(GOOD)
    (root / "home").mkdir()
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, tuple) and content[0] == "link":
            path.symlink_to(content[1])
        elif isinstance(content, tuple) and content[0] == "copy":
            (shutil.copytree if Path(content[1]).is_dir() else shutil.copyfile)(content[1], path)
        else:
            text = content.replace("{d}", str(root)) if isinstance(content, str) else content
            (path.write_text if isinstance(text, str) else path.write_bytes)(text)


def _tree(root: Path) -> dict[str, object]:
    """Every path under root with its bytes (or link target) and mode: what 'nothing written' compares."""
    out: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        rel = str(path.relative_to(root))
        out[rel] = (os.readlink(path) if path.is_symlink() else path.read_bytes() if path.is_file() else "dir",
                    st.st_mode, st.st_mtime_ns)
    return out


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    # Imported here, not at collection: importing the CLI imports gpunode.resolve.explain, which
    # replaces the function gpunode.resolve.explain that test_resolve_cases imports by name.
    from gpunode.cli.main import main

    with pytest.raises(SystemExit) as done:
        main(["gpunode", *argv])
    out = capsys.readouterr()
    code = done.value.code
    return (code if isinstance(code, int) else 1 if code else 0), out.out + out.err


@pytest.mark.parametrize("files,argv,expected", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_bad_input_exits_2_with_a_message_naming_it(files, argv, expected, tmp_path, monkeypatch, capsys):
    _make(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    # the user's cache dir holds what any run parsed (pylock.read, keyed by content), not this run's state
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path.with_name(tmp_path.name + "-cache")))
    for name in ("GPUNODE_INVENTORY", "GPUNODE_DEBUG", "PVE_TOKEN_SECRET"):
        monkeypatch.delenv(name, raising=False)
    before = _tree(tmp_path)

    code, output = run_cli([a.replace("{d}", str(tmp_path)) for a in argv], capsys)

    assert "Traceback" not in output and "internal error" not in output, output
    assert code == 2, output
    for text in expected:
        assert text in output, output
    assert SECRET not in output
    assert _tree(tmp_path) == before, "the failed run wrote or changed files"


def test_ansible_connection_vars_of_groups_are_honoured(tmp_path):
    (tmp_path / "hosts.yml").write_text(
        "all:\n"
        "  vars: {ansible_user: deploy, ansible_port: 2200, model_name: M}\n"
        "  children:\n"
        "    gpu:\n"
        "      vars: {ansible_user: gpu}\n"
        "      hosts:\n"
        "        box1: {ansible_ssh_host: 10.0.0.5}\n"
        "        box2: {ansible_host: 10.0.0.6, ansible_user: me, ansible_ssh_port: 22}\n"
        "    cpu:\n"
        "      hosts: {box3: }\n"
        "local:\n"                             # a top-level group beside `all`, as Ansible reads it
        "  hosts: {box4: {ansible_connection: local}}\n")
    inv = load(tmp_path / "hosts.yml")
    seen = {h.name: (h.address, h.user, h.port, h.connection) for h in inv.hosts.values()}
    assert seen == {"box1": ("10.0.0.5", "gpu", 2200, "ssh"),     # the child group beats `all`
                    "box2": ("10.0.0.6", "me", 22, "ssh"),        # the host beats its groups
                    "box3": ("box3", "deploy", 2200, "ssh"),      # `all` reaches every host
                    "box4": ("box4", "root", 22, "local")}
    assert inv.target("box1").vars == {"model_name": "M"}           # connection vars are not variables
    assert inv.groups["local"] == ["box4"] and "box4" in inv.groups["all"]


def test_the_inv_entry_point_gives_the_message_too(tmp_path):
    """The same check through `inv` (tasks.py), as a user types it: a real process, its real stderr."""
    _make(tmp_path, {})
    env = {k: v for k, v in os.environ.items() if k not in ("GPUNODE_DEBUG", "GPUNODE_INVENTORY")}
    proc = subprocess.run([sys.executable, "-m", "invoke", "provision", "--inventory", str(tmp_path / "inv"),
                           "--host", "lab", "--ct", "200", "--set", "hf_token={" + SECRET],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "--set hf_token=...: the value is not valid YAML" in proc.stderr and "Traceback" not in proc.stderr
    assert SECRET not in proc.stdout + proc.stderr


def test_an_unexpected_exception_is_reported_without_its_message(tmp_path, monkeypatch, capsys):
    """The last resort: a bug somewhere below the CLI must not print the values in its message."""
    from gpunode.facts import snapshot

    def broken(folder):
        raise KeyError(SECRET)

    monkeypatch.setattr(snapshot, "load", broken)
    monkeypatch.delenv("GPUNODE_DEBUG", raising=False)
    code, output = run_cli(["facts", "--facts", str(tmp_path)], capsys)
    assert code == 70 and "internal error: KeyError in facts.py" in output
    assert SECRET not in output and "Traceback" not in output
    assert len(output.splitlines()) == 1
