"""Adding a container to an inventory file keeps its comments and reads back as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode import inventory
from gpunode.errors import InventoryError
from gpunode.inventory.edit import add_container, add_container_file

REPO = Path(__file__).parents[2]


def test_lab_inventory_gains_the_container_after_the_last_one(tmp_path):
    src = (REPO / "inventory" / "hosts.yml").read_text()
    f = tmp_path / "hosts.yml"
    f.write_text(src)
    assert add_container_file(f, "lab", 230, [0, 1])
    new = f.read_text()
    assert new.startswith(src.split("\ngroups:")[0])  # everything before, comments included, unchanged
    assert "      230:  # added by inv onboard\n        gpus: [0, 1]\n" in new
    assert inventory.load(f).hosts["lab"].containers[230].gpus == (0, 1)
    assert not add_container_file(f, "lab", 230, [0, 1])  # second time: no change
    assert f.read_text() == new


def test_host_without_containers_gets_the_key(tmp_path):
    f = tmp_path / "hosts.yml"
    f.write_text((REPO / "inventory" / "example" / "hosts.yml").read_text())
    assert add_container_file(f, "rented", 231, None)
    inv = inventory.load(f)
    assert list(inv.hosts["rented"].containers) == [231]
    assert inv.hosts["rented"].vars["venv_root"] == "/workspace/venvs"
    assert "# The real case from the field notes" in f.read_text()


def test_empty_flow_mapping_becomes_a_block():
    text = "hosts:\n  pve1:\n    containers: {}   # none yet\n    port: 22\n"
    new = add_container(text, "x.yml", "pve1", 240, None)
    assert new == ("hosts:\n  pve1:\n    containers:    # none yet\n"
                   "      240: {}  # added by inv onboard\n    port: 22\n")


def test_flow_style_is_refused_and_the_file_stays(tmp_path):
    f = tmp_path / "hosts.yml"
    f.write_text("hosts:\n  pve1: {address: 10.0.0.1}\n")
    with pytest.raises(InventoryError, match="flow style"):
        add_container_file(f, "pve1", 240, None)
    assert f.read_text() == "hosts:\n  pve1: {address: 10.0.0.1}\n"
    assert [p.name for p in tmp_path.iterdir()] == ["hosts.yml"]  # no temp file left


def test_unknown_host_is_refused():
    with pytest.raises(InventoryError, match="host nope is not a block"):
        add_container("hosts:\n  pve1:\n    port: 22\n", "x.yml", "nope", 240, None)
