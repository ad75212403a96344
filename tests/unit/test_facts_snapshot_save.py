"""Saving a snapshot over an earlier one: replaced whole (no stale section), never half
written, and a folder that is not a snapshot is refused untouched."""

from __future__ import annotations

import os

import pytest

from gpunode.errors import FactError
from gpunode.facts.snapshot import RawFacts, Section, load, save


def raw(**sections: str) -> RawFacts:
    return RawFacts(target="gpu1", sections={k: Section(v) for k, v in sections.items()})


def test_saving_again_leaves_no_section_of_the_earlier_snapshot(tmp_path):
    folder = tmp_path / "snap"
    save(raw(os_release="ID=debian\n", nvidia_smi="old gpus\n"), folder)
    save(raw(os_release="ID=ubuntu\r\n"), folder)
    assert sorted(p.name for p in folder.iterdir()) == ["meta.json", "os_release.txt"]
    assert load(folder).sections == {"os_release": Section("ID=ubuntu\r\n")}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snap"]  # no temp or old folder left


def test_a_failed_save_leaves_the_earlier_snapshot_as_it_was(tmp_path):
    folder = tmp_path / "snap"
    save(raw(os_release="ID=debian\n", nvidia_smi="gpus\n"), folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(UnicodeEncodeError):
        save(raw(os_release="ID=x\n", nvidia_smi="bad \udc80 byte\n"), folder)  # unwritable as UTF-8
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snap"]


def test_a_folder_with_other_files_is_refused_and_left_alone(tmp_path):
    (tmp_path / "notes.md").write_text("mine\n")
    with pytest.raises(FactError, match=r"holds files that are not a snapshot's \(notes\.md\)"):
        save(raw(os_release="ID=debian\n"), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.md"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(FactError, match="it is a file, not a folder"):
        save(raw(os_release="ID=debian\n"), tmp_path / "file")


def test_a_symlinked_snapshot_folder_stays_a_symlink(tmp_path):
    real = tmp_path / "store" / "gpu1"
    save(raw(os_release="ID=debian\n"), real)
    link = tmp_path / "latest"
    link.symlink_to(real)
    save(raw(os_release="ID=ubuntu\n"), link)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert load(link).sections["os_release"].output == "ID=ubuntu\n"
    assert oct(real.stat().st_mode & 0o777) == "0o755"
