"""Drivers older than a pin set's CUDA: NVIDIA's minor version compatibility lets a
CUDA 12.x runtime run on any driver >= 525 (no JIT of newer PTX), CUDA 13.x needs
>= 580 (https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html).
The GPUs and drivers are the recorded public reports under tests/data/nvidia-smi."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpunode.facts.types import Driver
from gpunode.resolve import resolve
from gpunode.resolve.actions import RemoveTree
from tests.unit.resolve_facts import QWEN36, field_notes, h200, on


@pytest.mark.parametrize("shape, drv", [
    ("h100-x8", "550.90.07"), ("a100-x2-mig", "535.129.03"), ("a10-x1", "550.127.05"), ("l4-x1", "570.133.20"),
])
def test_real_reports_on_older_drivers_resolve_to_a_cuda12_plan_citing_minor_version_compatibility(shape, drv):
    # a100-x2-mig: GPU 1, the one without MIG (GPU 0's MIG devices show no UUID in the table)
    plan = resolve(on(shape, model=replace(QWEN36, size_bytes=10**9)), {"gpus": [1]} if "mig" in shape else {})
    assert plan.pinset == "cu12-legacy" and plan.toolkit.nvcc == "12.9"
    d = plan.decision("driver compatibility")
    assert d.value == "minor version compatibility"
    assert f"driver {drv} supports CUDA" in d.reason and "cannot JIT-compile PTX newer than its own CUDA" in d.reason
    assert "cuda-compatibility/minor-version-compatibility" in d.source
    assert any("minor version compatibility" in w for w in plan.warnings)
    # the CUDA 13 sets were skipped for the driver, and the reason says so
    assert f"cu13-latest (driver {drv} < 580 (CUDA 13.0))" in plan.decision("pin set").reason


def test_a_570_driver_also_names_the_opt_in_stack_it_runs_natively():
    plan = resolve(replace(h200(), driver=Driver("570.86.10", "12.8")))
    assert plan.pinset == "cu12-legacy"
    assert "driver 570.86.10 supports CUDA 12.8 natively" in plan.decision("driver compatibility").reason
    assert any(w.startswith("pinset: cu12-legacy-cu128 (unconfirmed) would run natively") for w in plan.warnings)
    chosen = resolve(replace(h200(), driver=Driver("570.86.10", "12.8")), {"pinset": "cu12-legacy-cu128"})
    assert chosen.decision("driver compatibility").value == "native"


def test_blackwell_at_570_runs_cuda129_through_compatibility():
    plan = resolve(field_notes(driver=Driver("570.86.10", "12.8")))
    assert plan.pinset == "cu12-legacy"
    assert plan.decision("driver compatibility").value == "minor version compatibility"
    # flashinfer's JIT on SM 12.x needs nvcc >= 12.9 (docs/sources.md#min-cuda): the pip nvcc is torch's 12.9, not the
    # container's 12.8 toolkit, and it compiles SASS, which the 570 driver loads without PTX JIT
    assert plan.toolkit.kind == "pip" and plan.toolkit.nvcc == "12.9"


def test_a_driver_that_supports_the_cuda_natively_says_so():
    plan = resolve(field_notes())
    d = plan.decision("driver compatibility")
    assert plan.pinset == "cu13-latest" and d.value == "native" and "590.48.01 >= 580" in d.reason


def test_a_native_stack_is_preferred_over_an_earlier_one_under_compatibility():
    """With only the CUDA 12 sets in the pool, a 572 driver runs cu12-legacy-cu128 (12.8) natively and
    cu12-legacy (12.9) only through compatibility: the native one wins."""
    facts = replace(h200(), driver=Driver("572.16", "12.8"))
    plan = resolve(facts, {"engine_version": "0.5.10.post1"})
    assert plan.pinset == "cu12-legacy-cu128"
    d = plan.decision("driver compatibility")
    assert d.value == "native" and "preferred over cu12-legacy" in d.reason


def test_a_flashinfer_change_resets_the_cache_the_servers_really_use():
    """The servers run with FLASHINFER_WORKSPACE_BASE=<cuda_jit_cache>, and flashinfer/jit/env.py (every pinned
    version) keeps its cache at $FLASHINFER_WORKSPACE_BASE/.cache/flashinfer."""
    from gpunode.facts.types import Install

    old = Install(venv="/opt/gpunode/venvs/cu13-latest", python="3.11", flashinfer="0.6.15.post1")
    for variables, cache in (({}, "/var/cache/gpunode/jit"), ({"cuda_jit_cache": "/srv/jit"}, "/srv/jit")):
        plan = resolve(field_notes(install=old), variables)
        (fix,) = [f for f in plan.fixes if f.id == "flashinfer-cache-reset"]
        assert plan.env["FLASHINFER_WORKSPACE_BASE"] == cache
        assert fix.actions == (RemoveTree(path=f"{cache}/.cache/flashinfer"),)
    same = Install(venv="/opt/gpunode/venvs/cu13-latest", python="3.11", flashinfer="0.7.2")
    assert "flashinfer-cache-reset" not in [f.id for f in resolve(field_notes(install=same)).fixes]
