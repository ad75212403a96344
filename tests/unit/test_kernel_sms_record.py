"""The record of what compat/kernel_sms.yml was read from (gpunode.knowledge.kernelsms): when the slow
test may take the file as read and download nothing, and when it must read the wheels again.

A wheel is made here from a real kernel library (tests/data/fatbin) and read by the real reader; the
files are written to a temporary folder, never to compat/.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from gpunode.knowledge import kernelsms

LIB = Path(__file__).resolve().parents[1] / "data" / "fatbin" / "sglang_kernel-0.4.10-x86_64-spatial_ops.abi3.so"
KERNEL = ("sglang-kernel", "0.4.10", "x86_64")
NAME = "sglang_kernel-0.4.10-cp310-abi3-manylinux2014_x86_64.whl"


@pytest.fixture
def world(tmp_path, monkeypatch):
    """One pinned kernel whose wheel holds the real spatial_ops library; the reader writes its file
    and record under tmp_path. Returns the lock table (key -> {wheel: sha256}) that pins it."""
    wheel = tmp_path / "wheels" / NAME
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(LIB, "sgl_kernel/spatial_ops.abi3.so")
    downloads: list[str] = []

    def download(package, version, machine, folder, tags=()):
        downloads.append(kernelsms.key(package, version, machine))
        return wheel

    monkeypatch.setattr(kernelsms, "wanted", lambda: [KERNEL])
    monkeypatch.setattr(kernelsms, "download", download)
    monkeypatch.setattr(kernelsms, "FILE", tmp_path / "kernel_sms.yml")
    monkeypatch.setattr(kernelsms, "READ", tmp_path / "kernel_sms-read.json")
    monkeypatch.setenv("GPUNODE_WHEEL_CACHE", str(tmp_path / "cache"))
    assert kernelsms.main(["--cache"]) == 0
    downloads.clear()
    return {"locks": {kernelsms.key(*KERNEL): {NAME: kernelsms.sha256(wheel)}}, "downloads": downloads,
            "wheel": wheel}


def test_a_record_the_locks_still_pin_reads_nothing_again(world):
    read, text = kernelsms.load_read(), kernelsms.FILE.read_text()
    assert kernelsms.sealed(read, text)
    assert read["wheels"][kernelsms.key(*KERNEL)] == {"wheel": NAME, "sha256": kernelsms.sha256(world["wheel"])}
    assert kernelsms.unread(read, world["locks"]) == []
    # what the reader wrote is what it reads: sm_90a etc. of the real library
    assert "sm_90a" in kernelsms.table_recorded()["sglang-kernel"]["0.4.10"]["x86_64"]["libraries"][
        "sgl_kernel/spatial_ops.abi3.so"]


def test_a_lock_that_pins_another_wheel_reads_that_one_again(world):
    locks = {kernelsms.key(*KERNEL): {NAME: "0" * 64}}  # re-locked: same name, other bytes
    assert kernelsms.unread(kernelsms.load_read(), locks) == [KERNEL]
    assert kernelsms.unread(kernelsms.load_read(), {}) == [KERNEL]  # no lock to check the record against
    # reading again gives the same entry, but the record names another sha256: the slow test fails
    wheels: dict[str, dict[str, str]] = {}
    text = kernelsms.render(kernelsms.table(kernelsms.cache(), only=[KERNEL], wheels=wheels))
    assert world["downloads"] == [kernelsms.key(*KERNEL)]
    assert text == kernelsms.FILE.read_text()
    assert wheels[kernelsms.key(*KERNEL)]["sha256"] != "0" * 64


def test_a_changed_reader_reads_every_wheel_again(world, monkeypatch, tmp_path):
    other = tmp_path / "fatbin.py"
    other.write_text(Path(kernelsms.fatbin.__file__).read_text() + "\nEXTRA = 1\n")
    monkeypatch.setattr(kernelsms, "READER", (Path(kernelsms.__file__), other))
    assert kernelsms.unread(kernelsms.load_read(), world["locks"]) == [KERNEL]


def test_a_docstring_alone_keeps_the_reader_current(world, monkeypatch, tmp_path):
    other = tmp_path / "fatbin.py"
    other.write_text(Path(kernelsms.fatbin.__file__).read_text().replace('"""', '"""Reworded. ', 1))
    monkeypatch.setattr(kernelsms, "READER", (Path(kernelsms.__file__), other))
    assert kernelsms.unread(kernelsms.load_read(), world["locks"]) == []


def test_an_entry_edited_by_hand_breaks_the_seal(world):
    text = kernelsms.FILE.read_text()
    assert "- sm_120a\n" in text
    edited = text.replace("- sm_120a\n", "", 1)  # a GPU's code dropped by hand
    assert not kernelsms.sealed(kernelsms.load_read(), edited)
    read = kernelsms.load_read()
    read["wheels"][kernelsms.key(*KERNEL)]["sha256"] = "1" * 64  # a record pointed at another wheel
    assert not kernelsms.sealed(read, text)


def test_the_check_fails_on_a_record_that_names_no_wheel(world, capsys):
    kernelsms.READ.write_text(json.dumps({"seal": "x"}))
    assert kernelsms.main(["--check", "--cache"]) == 1
    assert "does not record the wheels read" in capsys.readouterr().out


def test_the_record_keeping_code_is_not_the_reader(world, monkeypatch, tmp_path):
    """A change to how the record is kept reads nothing again; a change to what reading gives does."""
    source = Path(kernelsms.__file__).read_text()
    mine = tmp_path / "kernelsms.py"
    mine.write_text(source.replace("def load_read(", "def load_read(  # reworded\n", 1)
                    .replace("    path = path or READ\n", "    path = path if path else READ\n", 1))
    monkeypatch.setattr(kernelsms, "READER", (mine, Path(kernelsms.fatbin.__file__)))
    monkeypatch.setattr(kernelsms, "__file__", str(mine))
    assert kernelsms.unread(kernelsms.load_read(), world["locks"]) == []
    mine.write_text(source.replace('CORE = {"sglang-kernel": "common_ops"', 'CORE = {"sglang-kernel": "flash_ops"', 1))
    assert kernelsms.unread(kernelsms.load_read(), world["locks"]) == [KERNEL]
