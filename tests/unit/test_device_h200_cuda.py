"""The CUDA path as it ran on a real H200 (tests/data/device/h200-cuda/README.md).

Today's code, given that machine's facts, must plan the steps that ran there, and each step's
check must read the probe outputs recorded there before and after the run the way they were
read then; the fix added after run 1's link failure must cover exactly what the linker missed.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from gpunode import roles
from gpunode.facts import snapshot
from gpunode.facts.parse import parse
from gpunode.resolve import resolve
from gpunode.steps.base import NoChange, Probe
from tests.unit.resolve_facts import QWEN36

DATA = Path(__file__).resolve().parents[1] / "data"
RUN1 = json.loads((DATA / "device" / "h200-cuda" / "run1-before-links.json").read_text())
RUN2 = json.loads((DATA / "device" / "h200-cuda" / "run2.json").read_text())
VARS = {**roles.defaults(), "pinset": "cu13-b"}


def plan_and_steps():
    facts = replace(parse(snapshot.load(DATA / "snapshots" / "h200-2026-12-03")), model=QWEN36)
    plan = resolve(facts, VARS)
    ctx = roles.RoleContext(target="h200", vars=VARS, facts=facts, plan=plan)
    return facts, plan, [s for rp in roles.build(["cuda_fixes"], ctx) for s in rp.steps]


def test_the_snapshot_is_that_h200():
    facts, plan, _ = plan_and_steps()
    (gpu,) = facts.gpus
    assert (gpu.name, gpu.compute_cap, facts.driver.version, facts.driver.cuda) == \
           ("NVIDIA H200", "9.0", "580.159.04", "13.0")
    def fixes(d):  # ids and actions; rule line numbers move as the knowledge base grows
        return [(f["id"], f["actions"]) for f in json.loads(json.dumps(d["fixes"]))]
    assert fixes(plan.to_dict()) == fixes(RUN2["plan"])
    assert plan.toolkit.cuda_home == RUN2["jit"]["with"]["env"]["CUDA_HOME"]


def test_each_step_reads_the_recorded_probes_as_it_did_there():
    _, _, steps = plan_and_steps()
    recorded = RUN2["cuda_fixes"]["steps"]
    assert [s.id for s in steps] == [r["id"] for r in recorded]
    for step, rec in zip(steps, recorded, strict=True):
        for when in ("before", "after"):
            probe = Probe(rec[when]["exit"], rec[when]["output"])
            outcome = step.check(probe)
            assert type(outcome).__name__ == rec[when]["check"]["type"], (step.id, when)
        assert isinstance(step.check(Probe(rec["after"]["exit"], rec["after"]["output"])), NoChange), step.id
    assert RUN2["cuda_fixes"]["engine"]["error"] == ""
    assert RUN2["cuda_fixes"]["engine"]["changed"] == 3  # the JIT folder and the two links; libcuda.so was there


def test_without_the_fixes_flashinfer_finds_no_nvcc_and_with_them_the_kernel_is_right():
    without, with_ = RUN2["jit"]["without"], RUN2["jit"]["with"]
    assert not without["ok"] and "/usr/local/cuda/bin/nvcc: not found" in without["error"]
    assert with_["ok"] and with_["matches"] and with_["max_abs_err"] < 2e-3
    assert with_["which_nvcc"] == RUN2["plan"]["toolkit"]["cuda_home"] + "/bin/nvcc"
    assert RUN2["jit"]["system"]["ok"]


def test_the_links_fix_gives_the_linker_what_run1_missed():
    error = RUN1["jit"]["with"]["error"]
    assert "cannot find -lcudart" in error
    missing_dir = re.search(r" -L(\S+/lib64) ", error).group(1)
    _, plan, steps = plan_and_steps()
    links = {s.path: s.target for s in steps if s.id.startswith("link:")}
    assert links[missing_dir] == "lib"
    assert links[f"{plan.toolkit.cuda_home}/lib/libcudart.so"] == "libcudart.so.13"
    assert "pip-cuda-home-links" not in [f["id"] for f in RUN1["plan"]["fixes"]]


def test_cuda12_pip_layouts_get_no_cu13_links():
    facts, _, _ = plan_and_steps()
    plan = resolve(facts, {**VARS, "pinset": "cu12-legacy-cu128"})
    assert "pip-cuda-home-links" not in [f.id for f in plan.fixes]
