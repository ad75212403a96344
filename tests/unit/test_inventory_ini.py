"""Ansible's INI inventory: read as Ansible reads it, through the same rules as its YAML shape."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from gpunode.errors import InventoryError
from gpunode.inventory import load

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "inventory" / "ansible-ini"  # see its README.md
H200 = ROOT / "tests" / "data" / "snapshots" / "h200"


def test_ansibles_own_example_reads_as_its_comments_say():
    inv = load(DATA / "example1.ini")
    assert inv.groups["web"] == ["host1", "host2", "tomcat1", "tomcat2", "tomcat3", "jenkins1"]  # with children
    assert inv.groups["apache"] == ["tomcat1", "tomcat2", "tomcat3"]
    assert inv.hosts["host2"].port == 222                                   # inline: an integer
    assert inv.target("host1").vars == {"http_port": 8080, "myvar": 23, "has_java": False}
    assert inv.target("tomcat2").vars["myvar"] == 34                        # the host beats its groups
    assert inv.target("tomcat3").vars["mysecret"] == "03#pa33w0rd"          # quoted: # is no comment
    assert inv.target("jenkins1").vars["has_java"] is True                  # nginx:vars beats all:vars


def test_a_child_groups_variables_beat_its_parents(tmp_path):
    (tmp_path / "hosts.ini").write_text("[web:vars]\nx=parent\n[web:children]\nnginx\n[web]\n"
                                        "[nginx]\nj1\n[nginx:vars]\nx=child\n")
    assert load(tmp_path / "hosts.ini").target("j1").vars == {"x": "child"}


FLEET = """\
# the fleet, as an Ansible user keeps it
[blackwell]
kpro6 ansible_host=127.0.0.1 ansible_port=1 containers="{200: {'gpus': [0]}, 202: {'gpus': [0]}}"
kpro7 ansible_host=127.0.0.1 ansible_port=1 containers="{300: {'gpus': [0]}}"

[cloud]
rented:1 ansible_host=127.0.0.1 ansible_user=ubuntu

[gpu:children]
blackwell
cloud

[gpu:vars]
model_source=/mnt/models/Qwen3.6-27B
mem_fraction=0.8
tp=1
"""


def test_an_ini_fleet_drives_the_cli(tmp_path, capsys):
    from gpunode.cli.main import main

    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory" / "hosts").write_text(FLEET)   # Ansible's usual name, no suffix
    (tmp_path / "inventory" / "group_vars").mkdir()
    (tmp_path / "inventory" / "group_vars" / "cloud.yml").write_text("mem_fraction: 0.7\n")
    inv = load(tmp_path / "inventory")
    assert (inv.hosts["rented"].user, inv.hosts["rented"].port) == ("ubuntu", 1)
    assert sorted(inv.hosts["kpro6"].containers) == [200, 202]
    assert inv.target("rented").vars["mem_fraction"] == 0.7 and inv.target("kpro7", 300).vars["mem_fraction"] == 0.8
    with contextlib.suppress(SystemExit):  # the check after each plan finds nothing listening on port 1
        main(["gpunode", "provision", "-i", str(tmp_path / "inventory"), "-g", "gpu", "-l", "!kpro6/202",
              "--facts", str(H200), "-j"])
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["target"] for e in events if e["type"] == "plan"] == ["kpro6/200", "kpro7/300", "rented"]


@pytest.mark.parametrize("text,message", [
    ("[gpu]\nweb[01:20]\n", "hosts.ini:2: 'web[01:20]' is not a host name (host ranges"),
    ("[gpu]\nbox ansible_password=hunter2secret\n",
     "hosts.ini:2: ansible_password of host box: gpunode reads no password from the inventory"),
    ("[gpu:children]\ncpu\n", "[gpu:children] names group 'cpu', which is declared nowhere"),
    ("[gpu:vars]\nx=1\n", "[gpu:vars] is for group 'gpu', which is declared nowhere"),
    ("[gpu:hostvars]\n", "hosts.ini:1: section [gpu:hostvars] has an unknown type"),
    ("[gpu]\nbox mem_fraction\n", "hosts.ini:2: expected key=value after host box"),
    ("[gpu]\nbox extra_args='--x\n", "hosts.ini:2: cannot split the host line"),
    ("[a:children]\nb\n[b:children]\na\n", "groups b -> a -> b contain each other"),
    ("[gpu]\nbox ansible_port=yes\n", "hosts.ini:2: port of host box must be 1-65535, got 'yes'"),
])
def test_a_bad_ini_inventory_is_named_with_its_line(text, message, tmp_path):
    (tmp_path / "hosts.ini").write_text(text)
    with pytest.raises(InventoryError) as err:
        load(tmp_path)
    assert message in str(err.value)
    assert "hunter2secret" not in str(err.value)
