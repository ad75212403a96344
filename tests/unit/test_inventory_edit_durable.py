"""The inventory edit on real files: a symlinked inventory stays a symlink, the mode stays,
and a second editor at the same time is refused instead of losing the first one's change."""

from __future__ import annotations

import fcntl
import os

import pytest

from gpunode import inventory
from gpunode.errors import InventoryError
from gpunode.inventory.edit import add_container_file

TEXT = "# our hosts\nhosts:\n  pve1:\n    address: 10.0.0.1\n"


def test_symlinked_inventory_stays_a_symlink_and_its_target_is_edited(tmp_path):
    real = tmp_path / "repo" / "hosts.yml"
    real.parent.mkdir()
    real.write_text(TEXT)
    os.chmod(real, 0o640)
    link = tmp_path / "hosts.yml"
    link.symlink_to(real)
    assert add_container_file(link, "pve1", 240, [0])
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert inventory.load(real).hosts["pve1"].containers[240].gpus == (0,)
    assert real.read_text().startswith(TEXT)
    assert real.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in real.parent.iterdir()) == ["hosts.yml"]  # no temp or lock file


def test_a_second_editor_while_one_holds_the_file_is_refused_and_changes_nothing(tmp_path):
    f = tmp_path / "hosts.yml"
    f.write_text(TEXT)
    with open(f) as other:  # the first editor, between its read and its replace
        fcntl.flock(other, fcntl.LOCK_EX)
        with pytest.raises(InventoryError, match="another gpunode is editing") as err:
            add_container_file(f, "pve1", 240, None)
        assert "240" in err.value.hint
        assert f.read_text() == TEXT
    assert add_container_file(f, "pve1", 240, None)  # once it is done, the edit goes through


def test_a_lock_left_on_the_replaced_file_does_not_block_the_next_edit(tmp_path):
    """The lock belongs to the file the name leads to now, not to the one it replaced."""
    f = tmp_path / "hosts.yml"
    f.write_text(TEXT)
    with open(f) as stale:  # opened before the first edit replaces the file
        assert add_container_file(f, "pve1", 240, None)
        fcntl.flock(stale, fcntl.LOCK_EX)
        assert add_container_file(f, "pve1", 241, None)
    assert list(inventory.load(f).hosts["pve1"].containers) == [240, 241]
