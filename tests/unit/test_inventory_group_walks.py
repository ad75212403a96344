"""Group graphs are walked once per group, without recursion (issue 41): 22 levels of
[group:children] in a 1 KB INI file were 4 million paths (a hang) and a chain of 1500 groups
a RecursionError."""

from __future__ import annotations

import time

import pytest

from gpunode.errors import InventoryError
from gpunode.inventory import load


def diamonds(levels: int) -> str:
    """Two groups per level, each a child of both groups above: 2**levels paths to the host."""
    lines = ["[l0a]", "box1 ansible_host=10.0.0.1", "[l0b]", "box2 ansible_host=10.0.0.2"]
    for i in range(1, levels + 1):
        for side in "ab":
            lines += [f"[l{i}{side}:children]", f"l{i - 1}a", f"l{i - 1}b"]
    return "\n".join(lines) + "\n"


def test_a_diamond_of_22_levels_loads_at_once_with_every_member(tmp_path):
    path = tmp_path / "hosts.ini"
    path.write_text(diamonds(22))
    assert path.stat().st_size < 2048
    started = time.monotonic()
    inv = load(path)
    assert time.monotonic() - started < 5
    assert inv.groups["l22a"] == inv.groups["l22b"] == ["box1", "box2"]


def test_a_chain_of_1500_groups_loads(tmp_path):
    lines = ["[g0]", "box1 ansible_host=10.0.0.1"]
    for i in range(1, 1500):
        lines += [f"[g{i}:children]", f"g{i - 1}"]
    path = tmp_path / "hosts.ini"
    path.write_text("\n".join(lines) + "\n")
    inv = load(path)
    assert inv.groups["g1499"] == ["box1"]


def test_a_cycle_is_still_named(tmp_path):
    path = tmp_path / "hosts.ini"
    path.write_text("[a]\nbox1 ansible_host=10.0.0.1\n[b:children]\na\n[c:children]\nb\n[a:children]\nc\n")
    with pytest.raises(InventoryError, match=r"groups (a -> c -> b -> a|[abc] -> [abc] -> [abc] -> [abc]) contain "
                       "each other"):
        load(path)
