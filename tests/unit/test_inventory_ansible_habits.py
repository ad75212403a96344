"""What an Ansible inventory holds besides hosts.yml, read as Ansible reads it (issue 43): group_vars
and host_vars as .json or with no extension, `ansible-inventory --list` output as an inventory, Ansible
Vault refused with its real file and line, and `gpunode inventory` drawn as `ansible-inventory --graph`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpunode import inventory
from gpunode.errors import InventoryError

HOSTS = "all:\n  children:\n    gpu:\n      hosts:\n        gpu1: {ansible_host: 10.0.0.6}\n        gpu2:\n"


def site(tmp_path: Path) -> Path:
    (tmp_path / "hosts.yml").write_text(HOSTS)
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "host_vars").mkdir()
    return tmp_path


def test_vars_files_as_json_and_without_an_extension(tmp_path):
    site(tmp_path)
    (tmp_path / "group_vars" / "all.json").write_text('{"model_name": "Qwen/Qwen3-8B", "gpu_memory": 0.8}\n')
    (tmp_path / "group_vars" / "gpu").write_text("python: '3.12'\n")
    (tmp_path / "host_vars" / "gpu1.json").write_text('{\n  "mem_fraction": 0.85\n}\n')
    inv = inventory.load(tmp_path)
    t = inv.target("gpu1")
    assert (t.vars["model_name"], t.vars["python"], t.vars["mem_fraction"]) == ("Qwen/Qwen3-8B", "3.12", 0.85)
    assert t.origins["mem_fraction"] == f"{tmp_path}/host_vars/gpu1.json:2"
    assert t.origins["python"] == f"{tmp_path}/group_vars/gpu:1"


def test_a_vars_file_for_an_unknown_group_is_named_as_it_is_spelled(tmp_path):
    site(tmp_path)
    (tmp_path / "group_vars" / "gpus.json").write_text("{}\n")
    with pytest.raises(InventoryError, match=r"group_vars/gpus.json is for unknown group 'gpus'") as err:
        inventory.load(tmp_path)
    assert "did you mean 'gpu'?" in str(err.value)


def test_ansible_vault_is_refused_at_its_file_and_line(tmp_path):
    site(tmp_path)
    vault = tmp_path / "group_vars" / "all.yml"
    vault.write_text("$ANSIBLE_VAULT;1.1;AES256\n6132353562356235613362\n")
    with pytest.raises(InventoryError) as err:
        inventory.load(tmp_path)
    assert str(err.value).startswith(f"{vault}:1: an Ansible Vault file, which gpunode cannot decrypt")
    assert "ansible-inventory -i INVENTORY --list" in err.value.hint
    vault.write_text("model_name: m\nserver_api_key: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6132353562\n")
    with pytest.raises(InventoryError) as err:
        inventory.load(tmp_path)
    assert str(err.value).startswith(f"{vault}:2: an Ansible Vault value (!vault)")


# What `ansible-inventory -i hosts.yml --list` prints (ansible-core 2.16) for an inventory of two groups,
# gpus holding blackwell, and a host in no group; the form a dynamic inventory or a vault ends in.
LIST = {
    "_meta": {"hostvars": {
        "gpu1": {"ansible_host": "10.0.0.6", "ansible_user": "deploy", "model_name": "Qwen/Qwen3-8B"},
        "gpu2": {"ansible_host": "10.0.0.7", "ansible_become": True, "model_name": "Qwen/Qwen3-8B"},
        "lone": {"ansible_host": "10.0.0.9"}}},
    "all": {"children": ["ungrouped", "gpus"]},
    "gpus": {"children": ["blackwell"], "hosts": ["gpu2"]},
    "blackwell": {"hosts": ["gpu1", "gpu2"]},
    "ungrouped": {"hosts": ["lone"]},
}


def test_ansible_inventory_list_output_is_an_inventory(tmp_path):
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps(LIST, indent=4))
    inv = inventory.load(path)
    got = {h.name: (h.address, h.user, h.become) for h in inv.hosts.values()}
    assert got == {"gpu1": ("10.0.0.6", "deploy", False), "gpu2": ("10.0.0.7", "root", True),
                   "lone": ("10.0.0.9", "root", False)}
    assert sorted(inv.groups["gpus"]) == ["gpu1", "gpu2"] and inv.groups["ungrouped"] == ["lone"]
    assert inv.target("gpu2").vars["model_name"] == "Qwen/Qwen3-8B"
    assert inv.target("gpu1").origins["model_name"].startswith(f"{path}:")


def test_inventory_graph_as_ansible_inventory_draws_it(tmp_path, capsys):
    from tests.unit.test_cli_habits import run

    path = tmp_path / "inventory.json"
    path.write_text(json.dumps(LIST))
    code, out, _ = run(["inventory", "-i", str(path), "--graph"], capsys)
    assert code == 0
    assert out == ("@all:\n  |--@blackwell:\n  |  |--gpu1\n  |  |--gpu2\n  |--@gpus:\n  |  |--gpu2\n  |  |--gpu1\n"
                   "  |--@ungrouped:\n  |  |--lone\n")
    code, out, _ = run(["inventory", "-i", "inventory", "-g", "lab"], capsys)  # the lab's: containers under hosts
    assert out == "@lab:\n  |--lab\n  |  |--lab/200\n  |  |--lab/201\n  |  |--lab/202\n"
    code, _, err = run(["inventory", "-i", str(path), "-g", "gpu"], capsys)
    assert code == 2 and "no group 'gpu'" in err and "did you mean 'gpus'?" in err
