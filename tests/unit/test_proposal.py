"""A proposed pin set for a new sglang release (gpunode/knowledge/proposal.py, refresh.py), from PyPI answers
recorded in tests/data/pypi. "A new release" is played by 0.5.23 against the pin sets without
cu13-latest (the pin set that was written by hand for it), so the proposal can be held against it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from gpunode.knowledge import proposal, refresh, releases
from gpunode.resolve import load_kb

DATA = Path(__file__).resolve().parents[1] / "data" / "pypi"
TODAY = "2026-12-06"


def recorded(name: str) -> releases.Project:
    return releases.parse_project(json.loads((DATA / f"{name}.json").read_text()), f"https://pypi.org/pypi/{name}/json")


def meta(file: str) -> releases.Metadata:
    return releases.parse_metadata((DATA / file).read_text(), f"tests/data/pypi/{file}")


def newest_meta(name: str) -> releases.Metadata:
    p = recorded(name)
    return releases.Metadata(p.name, p.latest, p.latest_requires, p.latest_python, p.url)


@pytest.fixture(scope="module")
def before_latest():
    kb = load_kb()
    return dataclasses.replace(kb, pinsets=tuple(p for p in kb.pinsets if p.id != "cu13-latest"))


def test_the_newest_uncovered_release_is_found(before_latest):
    sg = recorded("sglang")
    assert refresh.uncovered(before_latest, sg).version == "0.5.23"
    assert refresh.uncovered(load_kb(), sg) is None        # today's pin sets cover sglang's newest


def test_the_proposal_pins_what_the_release_pins(before_latest):
    sg = newest_meta("sglang")
    p = proposal.propose(before_latest, sg, meta("torch-2.14.1.METADATA"), today=TODAY)
    asked = sg.pins()
    pins = {name: Requirement(req) for name, req in p.pins().items()}
    for name in ("torch", "sglang-kernel", "flashinfer-python"):
        assert pins[name].specifier == asked[name].specifier and pins[name].extras == asked[name].extras, name
    assert str(pins["sglang"]) == "sglang==0.5.23"
    assert p.entry["torch"] == {"version": "2.14.1", "cuda": "13.0"}
    assert p.entry["kernel"]["package"] == "sglang-kernel" and p.entry["flashinfer"]["version"] == "0.7.2"
    assert p.entry["python"]["min"] == "3.11"                 # sglang 0.5.23: Requires-Python >=3.11
    # and what a maintainer wrote by hand for 0.5.23 pins the same four
    latest = load_kb().pinset("cu13-latest")
    hand = {Requirement(x.req).name: str(Requirement(x.req).specifier) for x in latest.packages}
    for name, req in pins.items():
        if name in ("sglang", "torch", "sglang-kernel", "flashinfer-python"):
            assert hand[name] == str(req.specifier), name


def test_values_no_metadata_gives_are_copied_and_marked(before_latest, tmp_path):
    p = proposal.propose(before_latest, newest_meta("sglang"), meta("torch-2.14.1.METADATA"), today=TODAY)
    assert p.template.id == "cu13-b"                          # the newest pin set of torch CUDA 13.0 then
    for key in ("driver_min", "driver_native", "glibc_min", "machines", "python.max", "kernel.links_libnuma"):
        assert key in p.copied and "copied from cu13-b (same torch CUDA 13.0)" in p.copied[key]
    file, locks, failed = refresh.write(before_latest, p, command="test", folder=tmp_path, lock=False)
    text = file.read_text()
    assert file.name == "cu13-sglang-0.5.23.yml" and not locks and not failed
    lines = {line.strip().split(":")[0]: line for line in text.splitlines() if ":" in line}
    assert "# copied from cu13-b" in lines["driver_min"] and "# copied from" not in lines["version"]
    # it loads as pinsets.yml's loader loads a pin set: ready to paste after review
    pinset = refresh.as_pinset(before_latest, p, file)
    assert pinset.status == "unconfirmed" and pinset.driver_min == "580" and pinset.machines == ("x86_64", "aarch64")
    assert "driver_min" in pinset.unconfirmed[0] and "cu13-b" in pinset.unconfirmed[0]
    assert yaml.safe_load(text)["pinsets"][0]["version"] == "0.5.23"


def test_a_cuda_12_release_copies_from_the_pin_set_of_its_torch_cuda():
    p = proposal.propose(load_kb(), meta("sglang-0.5.10.post1.METADATA"), meta("torch-2.9.1.METADATA"), today=TODAY)
    assert p.entry["torch"]["cuda"] == "12.8"                 # PyPI's torch 2.9.1 wheel: CUDA 12.8 runtime
    assert p.template.id == "cu12-legacy-cu128"
    hand = sorted(x.req for x in p.template.packages)
    assert sorted(p.pins().values()) == hand                  # flashinfer-cubin pinned too, as by hand


def test_what_changed_against_the_copied_pin_set(before_latest):
    p = proposal.propose(before_latest, newest_meta("sglang"), meta("torch-2.14.1.METADATA"), today=TODAY)
    lines = proposal.changes(p)
    assert lines[0] == "sglang 0.5.17 -> 0.5.23 (pin set cu13-b -> proposed cu13-sglang-0.5.23)"
    assert {"torch: 2.11.0 -> 2.14.1", "sglang-kernel: 0.4.5 -> 0.4.10", "flashinfer-python: 0.6.15.post1 -> 0.7.2",
            "python min: 3.10 -> 3.11"} <= set(lines)


def test_a_torch_cuda_no_pin_set_has_is_flagged():
    torch = newest_meta("torch")                              # torch 2.15.0: cuda-toolkit==13.2.2
    assert proposal.torch_cuda(torch) == "13.2"
    template, why = proposal.template_for(load_kb(), "13.2")
    assert template.id == "cu13-latest" and "same major" in why


def test_glibc_is_read_from_the_wheels_manylinux_tags(before_latest):
    projects = {n: recorded(n) for n in ("sglang", "torch", "sglang-kernel")}
    both = ("x86_64", "aarch64")
    # sglang 0.5.23: manylinux_2_34 wheels; torch 2.14.1 manylinux_2_28; sglang-kernel 0.4.10 manylinux2014
    new = refresh.wheel_floor(projects, {"sglang": "0.5.23", "torch": "2.14.1", "sglang-kernel": "0.4.10"}, both)
    assert new == ("2.34", []) and load_kb().pinset("cu13-latest").glibc_min == "2.34"
    # sglang 0.5.10.post1 is pure Python: torch's manylinux_2_28 decides, as written by hand for cu12-legacy
    old = refresh.wheel_floor(projects, {"sglang": "0.5.10.post1", "torch": "2.9.1", "sglang-kernel": "0.4.1"},
                                ("x86_64",))
    assert old == ("2.28", []) and load_kb().pinset("cu12-legacy").glibc_min == "2.28"
    # torch 1.9.1 had no aarch64 wheel on PyPI
    _, notes = refresh.wheel_floor(projects, {"torch": "1.9.1"}, both)
    assert notes == ["torch 1.9.1 has no Linux aarch64 wheel on PyPI: drop aarch64 from machines"]
    p = proposal.propose(before_latest, newest_meta("sglang"), meta("torch-2.14.1.METADATA"), today=TODAY,
                         glibc=new)
    assert p.entry["glibc_min"] == "2.34" and "glibc_min" not in p.copied
    assert not any(line.startswith("glibc_min") for line in proposal.changes(p))   # same as cu13-b's
    assert "manylinux tags" in p.entry["source"]


def test_lock_changes_name_what_floated_per_target(before_latest):
    """The committed locks of cu13-latest stand for a proposal's new locks, against cu13-b's."""
    p = proposal.propose(before_latest, newest_meta("sglang"), meta("torch-2.14.1.METADATA"), today=TODAY)
    from gpunode.resolve import pylock

    locks = [pylock.read(f) for f in sorted((pylock.ROOT / "cu13-latest").glob("pylock.*-py31[12].toml"))]
    lines = refresh.lock_changes(before_latest, p, locks)
    assert all("differ from cu13-b's lock" in line for line in lines)
    text = " ".join(lines)
    assert "sglang 0.5.17 -> 0.5.23" in text and "torch 2.11.0 -> 2.14.1" in text
    assert sum(line.count("pylock.") for line in lines) == len(locks)      # every target named once
