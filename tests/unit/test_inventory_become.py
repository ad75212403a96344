"""become in the inventory (issue 30): gpunode's keys and Ansible's variables map onto the same
host settings; a password never comes from the inventory, and a become method other than sudo is
refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode import inventory
from gpunode.errors import InventoryError


def load(tmp_path: Path, text: str, name: str = "hosts.yml") -> inventory.Inventory:
    path = tmp_path / name
    path.write_text(text)
    return inventory.load(path)


def test_gpunode_keys(tmp_path):
    inv = load(tmp_path, "hosts:\n  rented: {address: 203.0.113.7, user: ubuntu, become: true}\n"
                         "  svc: {address: 203.0.113.8, user: ubuntu, become: yes, become_user: gpu}\n"
                         "  kpro6: {address: 10.0.0.6}\n")
    got = {n: (h.user, h.become, h.become_user) for n, h in inv.hosts.items()}
    assert got == {"rented": ("ubuntu", True, "root"), "svc": ("ubuntu", True, "gpu"), "kpro6": ("root", False, "root")}


def test_ansible_yaml_variables_on_the_host_and_its_group(tmp_path):
    inv = load(tmp_path, """all:
  children:
    rented:
      vars: {ansible_user: ubuntu, ansible_become: true, ansible_become_method: sudo}
      hosts:
        gpu1: {ansible_host: 203.0.113.7}
        gpu2: {ansible_host: 203.0.113.8, ansible_become_user: svc}
""")
    got = {n: (h.user, h.become, h.become_user) for n, h in inv.hosts.items()}
    assert got == {"gpu1": ("ubuntu", True, "root"), "gpu2": ("ubuntu", True, "svc")}


def test_ansible_ini_booleans(tmp_path):
    inv = load(tmp_path, "[rented]\ngpu1 ansible_host=203.0.113.7 ansible_user=ubuntu ansible_become=yes\n"
                         "gpu2 ansible_host=203.0.113.8 ansible_become=False\n", "hosts.ini")
    assert (inv.hosts["gpu1"].become, inv.hosts["gpu2"].become) == (True, False)


@pytest.mark.parametrize("key", ["ansible_become_password", "ansible_become_pass", "ansible_ssh_pass"])
def test_a_password_in_the_inventory_is_refused_without_showing_it(tmp_path, key):
    with pytest.raises(InventoryError) as err:
        load(tmp_path, f"all:\n  hosts:\n    gpu1: {{ansible_become: true, {key}: hunter2hunter2}}\n")
    text = str(err.value)
    assert f"hosts.yml:3: {key} of host gpu1: gpunode reads no password from the inventory" in text
    assert "-K (--ask-become-pass)" in text and "GPUNODE_BECOME_PASSWORD" in text
    assert "hunter2" not in text


def test_become_methods_other_than_sudo_are_refused(tmp_path):
    with pytest.raises(InventoryError, match="ansible_become_method='su' of host gpu1: gpunode becomes root "
                                             "with sudo only"):
        load(tmp_path, "all:\n  hosts:\n    gpu1: {ansible_become: true, ansible_become_method: su}\n")


def test_bad_values(tmp_path):
    with pytest.raises(InventoryError, match="become of host h must be true or false, got 'maybe'"):
        load(tmp_path, "hosts:\n  h: {become: maybe}\n")
    with pytest.raises(InventoryError, match="become of h works over ssh only"):
        load(tmp_path, "hosts:\n  h: {connection: local, become: true}\n")
    with pytest.raises(InventoryError, match="become_user"):
        load(tmp_path, "hosts:\n  h: {become: true, become_user: 'root; id'}\n")
