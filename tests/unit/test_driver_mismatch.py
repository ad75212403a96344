"""Host/container driver mismatch: found from the facts, refused by the pipeline before any change."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpunode import pipeline
from gpunode.errors import FactError
from gpunode.facts import driver_match, snapshot
from gpunode.facts.parse import parse
from gpunode.facts.snapshot import Section
from gpunode.inventory import Container, Host, Target

DATA = Path(__file__).parents[1] / "data"
H200 = DATA / "snapshots" / "h200"


def h200(**sections: str) -> snapshot.RawFacts:
    raw = snapshot.load(H200)
    return replace(raw, sections={**raw.sections, **{k: Section(v) for k, v in sections.items()}})


def lxc_target() -> Target:
    host = Host(name="kpro6", address="kpro6.lan")
    return Target(host, Container(200, (0, 1), {}, "inventory/hosts.yml:9"), {})


def test_matching_recording_is_no_mismatch():
    raw = h200()
    assert driver_match.check(raw, parse(raw)) is None


def test_a_host_upgrade_leaves_the_container_libraries_behind():
    libs = (H200 / "libs.txt").read_text().replace("580.159.04", "575.57.08")
    raw = h200(libs=libs)
    found = driver_match.check(raw, parse(raw))
    assert found is not None and (found.kernel, found.userspace) == ("580.159.04", "575.57.08")
    text, hint = driver_match.message(found, "kpro6/200", True, "kpro6", 200, [0, 1])
    assert "user-space libraries are 575.57.08 but the kernel module is 580.159.04" in text
    assert hint.startswith("re-run inv onboard --host kpro6 --ct 200 --gpus 0,1")


@pytest.mark.parametrize("name", ["nvml-570.124.txt", "nvml-565.57-host-535.txt"])
def test_nvml_refusing_is_a_mismatch_even_when_major_minor_look_equal(name):
    smi = (DATA / "driver-mismatch" / name).read_text()
    raw = h200(nvidia_query=smi, nvidia_smi=smi, libs="",
               driver_proc="NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build\n")
    found = driver_match.check(raw, parse(raw))
    assert found is not None and found.kernel == "570.124.06"
    assert found.userspace == smi.split("NVML library version: ")[1].strip()
    assert "Driver/library version mismatch" in found.evidence


def test_the_pipeline_refuses_before_any_step(monkeypatch):
    libs = (H200 / "libs.txt").read_text().replace("580.159.04", "575.57.08")
    raw = h200(libs=libs)
    monkeypatch.setattr(snapshot, "load", lambda folder: raw)
    resolved = []
    with pytest.raises(FactError) as err:
        pipeline.prepare(lxc_target(), transport=None, facts_dir=H200,  # type: ignore[arg-type]
                         resolve=lambda *a: resolved.append(a))
    assert "575.57.08" in err.value.message and "580.159.04" in err.value.message
    assert "re-run inv onboard --host kpro6 --ct 200 --gpus 0,1" in err.value.hint
    assert resolved == []  # refused before the resolver, so before any role or step


def test_a_plain_host_is_told_to_reboot():
    libs = (H200 / "libs.txt").read_text().replace("580.159.04", "575.57.08")
    raw = h200(libs=libs)
    found = driver_match.check(raw, parse(raw))
    _, hint = driver_match.message(found, "rented", False)
    assert hint.startswith("reboot")
