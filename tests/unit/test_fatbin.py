"""The fat-binary reader on a real library cut from a released wheel (tests/data/fatbin/README.md)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from gpunode.knowledge import fatbin
from gpunode.resolve.kernels import runs_on

LIB = Path(__file__).resolve().parents[1] / "data" / "fatbin" / "sglang_kernel-0.4.10-x86_64-spatial_ops.abi3.so"


def test_reads_the_sass_entries_of_a_real_kernel_library():
    with LIB.open("rb") as f:
        codes = list(fatbin.codes(f))
    # one kernel, built once per architecture: sm_90 twice (plain and arch-specific 'a')
    assert sorted(c.name for c in codes) == ["sm_100f", "sm_120a", "sm_80", "sm_89", "sm_90", "sm_90a"]
    assert {c.kind for c in codes} == {"sass"}


def test_a_wheel_is_read_library_by_library(tmp_path):
    wheel = tmp_path / "k-1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(LIB, "k/spatial_ops.abi3.so")
        zf.writestr("k/plain.so", b"not an ELF file")  # skipped, as a library without device code
        zf.writestr("k/__init__.py", "")
    by_lib = fatbin.wheel_codes(str(wheel))
    assert list(by_lib) == ["k/spatial_ops.abi3.so"]
    assert fatbin.summary(by_lib)["ptx"] == []


@pytest.mark.parametrize("cc, runs", [
    ("8.0", True), ("8.6", True), ("8.9", True), ("9.0", True),  # sm_80 SASS runs on every 8.x
    ("10.0", True), ("10.3", True),                              # sm_100f: the whole 10.x family
    ("12.0", True), ("12.1", False),                             # sm_120a: only the exact GPU
    ("7.5", False), ("7.0", False), ("11.0", False),             # no SASS of that major, no PTX
])
def test_which_gpus_can_load_it(cc, runs):
    with LIB.open("rb") as f:
        names = [c.name for c in fatbin.codes(f)]
    assert runs_on(names, [], cc) is runs


def test_ptx_is_compiled_by_the_driver_for_newer_gpus_only():
    assert runs_on([], ["compute_75"], "8.6") and not runs_on([], ["compute_75"], "7.0")


def test_not_an_elf_file_is_an_error(tmp_path):
    bad = tmp_path / "x.so"
    bad.write_bytes(b"MZ" + bytes(100))
    with bad.open("rb") as f, pytest.raises(fatbin.FatbinError):
        list(fatbin.codes(f))
