import re
from pathlib import Path

import pytest

from gpunode import inventory
from gpunode.errors import InventoryError

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "inventory"


def test_example_inventory_layers_group_and_container_vars():
    inv = inventory.load(ROOT / "inventory" / "example")
    target = inv.target("kpro6", 200, overrides={"mem_fraction": 0.8}, defaults={"mem_fraction": 0.5, "x": 1})
    assert target.name == "kpro6/200"
    assert target.vars["gpus"] == [0, 1, 2, 3, 4, 5, 6, 7]
    assert target.vars["model_name"] == "Qwen3.6-27B"     # top-level vars
    assert target.vars["mem_fraction"] == 0.8             # --set beats group_vars/blackwell.yml (0.90)
    assert target.vars["x"] == 1                          # role default survives when nobody overrides


def test_group_vars_beat_top_vars_and_host_vars_beat_group_vars(tmp_path):
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "hosts.yml").write_text(
        "hosts:\n  h1: {address: 127.0.0.1}\ngroups:\n  g: {hosts: [h1], vars: {a: group-inline}}\n"
        "vars: {a: top, b: top}\n")
    (tmp_path / "group_vars" / "g.yml").write_text("a: group-file\nc: group\n")
    (tmp_path / "host_vars" / "h1.yml").write_text("c: host\n")
    v = inventory.load(tmp_path).target("h1").vars
    assert v == {"a": "group-file", "b": "top", "c": "host"}


def test_plain_ssh_host_with_port():
    inv = inventory.load(ROOT / "inventory" / "example")
    t = inv.target("rented")
    assert t.container is None and t.host.port == 41022 and t.vars["venv_root"] == "/workspace/venvs"


def test_ansible_yaml_inventory_loads_with_ansible_keys():
    inv = inventory.load(DATA / "ansible")
    kpro6 = inv.host("kpro6")
    assert (kpro6.address, kpro6.user, kpro6.key) == ("10.0.0.6", "root", "~/.ssh/id_ed25519")
    assert inv.host("box").port == 41022
    assert inv.target("kpro6", 200).vars == {"model_name": "Qwen3.6-27B", "mem_fraction": 0.88, "gpus": [0, 1]}
    assert inv.target("box").vars["venv_root"] == "/workspace/venvs"
    assert [t.name for t in inv.group_targets("proxmox")] == ["kpro6/200"]


def test_ansible_group_variables_layer_by_depth_then_name_as_ansible_does(tmp_path):
    # Ansible sorts a host's groups by (depth, name): a child's variables beat its parent's,
    # and of two groups at one depth the later name wins, whatever order they are written in.
    (tmp_path / "hosts.yml").write_text(
        "all:\n  children:\n"
        "    web:\n      vars: {x: parent, y: web}\n      children:\n"
        "        nginx: {vars: {x: child}, hosts: {j1: }}\n"
        "    zeta: {vars: {y: zeta}, hosts: {j1: }}\n"
        "    alpha: {vars: {y: alpha}, hosts: {j1: }}\n")
    assert inventory.load(tmp_path / "hosts.yml").target("j1").vars == {"x": "child", "y": "zeta"}


def test_unknown_key_names_file_line_and_suggests():
    with pytest.raises(InventoryError) as err:
        inventory.load(DATA / "bad_key")
    text = str(err.value)
    assert "bad_key/hosts.yml:4" in text and "'containres'" in text and "did you mean 'containers'" in text


def test_duplicate_key_is_refused_with_line():
    with pytest.raises(InventoryError, match=r"dup/hosts.yml:4: key 'address' appears twice"):
        inventory.load(DATA / "dup")


def test_bad_port_names_host_and_value():
    with pytest.raises(InventoryError, match=r"badport/hosts.yml:4: port of host rented must be 1-65535, got '22o'"):
        inventory.load(DATA / "badport")


def test_unknown_host_and_container_say_what_exists():
    inv = inventory.load(ROOT / "inventory" / "example")
    with pytest.raises(InventoryError, match="did you mean 'kpro6'"):
        inv.target("kpro7")
    with pytest.raises(InventoryError, match="containers listed for kpro6: 200"):
        inv.target("kpro6", 201)


def test_yaml_syntax_error_names_line(tmp_path):
    (tmp_path / "hosts.yml").write_text("hosts:\n  a: {address: [\n")
    with pytest.raises(InventoryError, match=r"hosts.yml:\d+: YAML syntax error"):
        inventory.load(tmp_path)


@pytest.mark.parametrize(("text", "said"), [
    ("hosts:\n  ~: {address: 10.0.0.1}\n", "hosts.yml:2: the host name ~ (or null) is read by YAML as None"),
    ("hosts:\n  yes: {address: 10.0.0.1}\n", "hosts.yml:2: the host name yes/true/on is read by YAML as True"),
    ("all:\n  hosts:\n    no: {ansible_host: 10.0.0.1}\n", "the host name no/false/off is read by YAML as False"),
])
def test_a_host_name_yaml_reads_as_null_or_a_boolean_is_refused(tmp_path, text, said):
    """issue 41: `~` and `yes` became hosts named "None" and "True"."""
    (tmp_path / "hosts.yml").write_text(text)
    with pytest.raises(InventoryError, match=re.escape(said)):
        inventory.load(tmp_path / "hosts.yml")


def test_an_inventory_folder_with_two_main_files_is_refused(tmp_path):
    """issue 41: hosts.yaml beside hosts.yml was ignored without a word."""
    (tmp_path / "hosts.yml").write_text("hosts:\n  a: {address: 10.0.0.1}\n")
    (tmp_path / "hosts.yaml").write_text("hosts:\n  b: {address: 10.0.0.2}\n")
    with pytest.raises(InventoryError, match="has hosts.yml and hosts.yaml: only one would be read"):
        inventory.load(tmp_path)
