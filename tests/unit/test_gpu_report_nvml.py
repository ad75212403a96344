"""A pasted nvidia-smi that stopped at NVML's "Driver/library version mismatch" is named as such, with
what to do, not "not a GPU report" (tests/data/driver-mismatch/README.md says where each came from)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.facts import gpu_report
from tests.unit.test_resolve_cli import gpunode

DATA = Path(__file__).resolve().parents[1] / "data" / "driver-mismatch"


@pytest.mark.parametrize(("name", "library"), [("nvml-570.124.txt", "570.124"), ("nvml-565.57-host-535.txt", "565.57")])
def test_the_nvml_mismatch_is_named_with_its_library_version_and_the_fix(name, library):
    report = gpu_report.read_report((DATA / name).read_text())
    assert report.format == gpu_report.NVML and not report.gpus
    message, hint = gpu_report.refusal(name, report)
    assert "Driver/library version mismatch" in message and f"NVML library version {library}" in message
    assert "the loaded driver and the library differ: reload the nvidia module or reboot" in message
    assert "not a GPU report" not in message and "reboot" in hint


def test_resolve_refuses_the_paste_saying_so(tmp_path):
    out = gpunode("resolve", "--nvidia-smi", str(DATA / "nvml-570.124.txt"), "--model", str(tmp_path))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "the loaded driver and the library differ: reload the nvidia module or reboot" in out.stderr
