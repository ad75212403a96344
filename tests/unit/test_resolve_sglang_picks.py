"""Where SGLang's own choice (derived from the pinned wheel by `inv kb.refresh`) holds, gpunode passes no
--attention-backend; where a gpus.yml rule says that choice fails on the hardware, it passes its own.

The picks are injected into the KB here so that the rule is tested apart from what today's derived
file holds (tests/test_sglang_judge.py checks the file against the wheels).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpunode.facts.types import Driver
from gpunode.resolve import explain, resolve
from gpunode.resolve.load import load
from tests.unit.resolve_facts import field_notes, on
from tests.unit.test_resolve_cases import flags_of

KB = load()
ARCH = "Qwen3_5ForConditionalGeneration"


def with_pick(pinset: str, cc: str, backend: str, arch: str = ARCH):
    picks = {pinset: {arch: {cc: {"attention_backend": backend}}}}
    return replace(KB, sglang_picks=picks)


def test_sglangs_own_pick_that_no_rule_contradicts_is_left_to_it():
    kb = with_pick("cu13-latest", "12.0", "flashinfer")
    plan = resolve(field_notes(), kb=kb)
    argv = plan.servers[0].argv
    assert "--attention-backend" not in argv
    d = plan.decision("attention backend")
    assert d.value == "left to SGLang (flashinfer)" and "kb.refresh" in d.source
    assert "attention backend: left to SGLang (flashinfer)" in explain(plan)


def naming(kb, cc: str, backend: str, arch: str = ARCH):
    """kb with the caveat on `backend` at `cc` naming `arch` as an architecture its source saw fail."""
    row = kb.arch(cc)
    warned = replace(row.attention_warn[backend], architectures=(arch,))
    row = replace(row, attention_warn={**row.attention_warn, backend: warned})
    return replace(kb, archs=tuple(row if a.cc == cc else a for a in kb.archs))


def test_sglangs_pick_that_a_rule_says_fails_for_this_architecture_is_overridden_with_the_reason():
    kb = naming(with_pick("cu13-latest", "12.0", "triton"), "12.0", "triton")
    plan = resolve(field_notes(), kb=kb)
    assert flags_of(plan.servers[0].argv)["--attention-backend"] == "flashinfer"
    reason = plan.decision("attention backend").reason
    assert "would pick triton itself here" in reason and "shared memory" in reason


def test_a_caveat_that_names_other_architectures_leaves_sglangs_pick_and_says_it():
    # issue 38: the sm_120 shared-memory caveat on triton names no failure of this model (its sources are
    # GLM-4.5-Air-FP8 and gpt-oss), so SGLang's own triton stands and the caveat is a warning
    kb = naming(with_pick("cu13-latest", "12.0", "triton"), "12.0", "triton", arch="Glm4MoeForCausalLM")
    plan = resolve(field_notes(), kb=kb)
    assert "--attention-backend" not in plan.servers[0].argv
    assert plan.decision("attention backend").value == "left to SGLang (triton)"
    assert any("shared memory" in w and "SGLang's choice stands" in w for w in plan.warnings)


def test_a_backend_the_rows_do_not_list_is_sglangs_business_for_a_dense_model():
    """DeepSeek-V3.2 picks dsa on Blackwell: not a gpus.yml backend, and no rule says it fails."""
    kb = with_pick("cu13-latest", "10.0", "dsa", arch="Qwen3ForCausalLM")
    facts = on("b200-x8", model=replace(field_notes().model, architectures=("Qwen3ForCausalLM",),
                                         model_type="qwen3", hybrid_linear_attention=False))
    facts = replace(facts, driver=Driver("580.95.05", "13.0"))    # the recorded B200 has 575
    plan = resolve(facts, {"pinset": "cu13-latest"}, kb=kb)
    assert "--attention-backend" not in plan.servers[0].argv


def test_without_derived_data_nothing_is_forced_and_the_choice_is_left_to_sglang():
    # issue 38: the GPU's default for other models is not passed for an architecture nothing was derived for
    plan = resolve(field_notes(), kb=replace(KB, sglang_picks={}))
    assert "--attention-backend" not in plan.servers[0].argv
    assert plan.decision("attention backend").value == "left to SGLang"
    assert "not derived" in plan.decision("attention backend").reason


def test_the_inventorys_choice_still_wins_over_sglangs():
    kb = with_pick("cu13-latest", "12.0", "flashinfer")
    plan = resolve(field_notes(), {"attention_backend": "trtllm_mha"}, kb=kb)
    assert flags_of(plan.servers[0].argv)["--attention-backend"] == "trtllm_mha"


# The recorded B200 (driver 575.57.08) with a driver every pin set accepts, so each pinned sglang is asked.
B200 = "b200-x8"
SGLANG = [p.id for p in KB.pinsets if p.engine == "sglang"]


def b200(name: str):
    from tests.unit.test_resolve_model_fit import model

    return replace(on(B200, model=model(name)), driver=Driver("580.95.05", "13.0"))


@pytest.mark.parametrize("pinset", SGLANG)
@pytest.mark.parametrize("name", ["qwen3.6-27b-nvfp4", "qwen3.6-35b-a3b-nvfp4"])
def test_qwen3_5_on_b200_runs_the_cookbooks_trtllm_mha_over_sglangs_own_triton(name, pinset):
    """The rule with a source (models.yml attention_prefer): SGLang's own pick there is triton (the derived
    data of every pin set), the cookbooks run trtllm_mha on B200; the reason says both."""
    plan = resolve(b200(name), {"pinset": pinset})
    assert flags_of(plan.servers[0].argv)["--attention-backend"] == "trtllm_mha"
    d = plan.decision("attention backend")
    own = KB.sglang_pick(pinset, plan.model.architectures[0], "10.0")["attention_backend"]
    assert own == "triton" and "cookbook" in d.reason and "would pick triton itself" in d.reason
    assert "docs.sglang.io/cookbook/autoregressive/Qwen/Qwen3.5" in d.source and "attention_prefer" in d.rule
    assert "attention backend: trtllm_mha" in explain(plan)


def test_the_b200_rule_is_for_its_family_only_a_dense_qwen3_keeps_sglangs_choice():
    plan = resolve(b200("qwen3-32b-fp8"), {"pinset": "cu13-latest"})
    assert plan.decision("attention backend").value.startswith("left to SGLang (")


def test_the_inventorys_backend_still_wins_over_the_family_rule():
    plan = resolve(b200("qwen3.6-27b-nvfp4"), {"pinset": "cu13-latest", "attention_backend": "triton"})
    assert flags_of(plan.servers[0].argv)["--attention-backend"] == "triton"
    assert "set by the inventory" in plan.decision("attention backend").reason


def test_a_preferred_backend_the_pinned_sglang_rejects_is_not_passed():
    # what sglang 0.5.17 really says of trtllm_mha for this class on an H200 (the derived data), put on the B200
    message = KB.sglang_pick("cu13-b", ARCH, "9.0")["rejects"]["--attention-backend trtllm_mha"]
    kb = replace(KB, sglang_picks={"cu13-latest": {"Qwen3_5ForConditionalGeneration": {"10.0": {
        "attention_backend": "triton", "rejects": {"--attention-backend trtllm_mha": message}}}}})
    plan = resolve(b200("qwen3.6-27b-nvfp4"), {"pinset": "cu13-latest"}, kb=kb)
    assert plan.decision("attention backend").value == "left to SGLang (triton)"
    said = [w for w in plan.warnings if "prefers attention backend trtllm_mha" in w]
    assert said and "only supported on Blackwell" in said[0]


def test_the_b200_rule_yields_to_the_inventorys_no_buffer_which_sglang_refuses_with_trtllm_mha():
    """sglang 0.5.23 asserts "no_buffer do not support trtllm_mha attention backend" (the judge met it on this
    plan): with mamba_strategy: no_buffer the backend stays SGLang's own choice, and the plan says why."""
    plan = resolve(b200("qwen3.6-27b-nvfp4"), {"pinset": "cu13-latest", "mamba_strategy": "no_buffer"})
    assert "--attention-backend" not in plan.servers[0].argv
    said = [w for w in plan.warnings if "prefers attention backend trtllm_mha" in w]
    assert said and "no_buffer do not support trtllm_mha" in said[0]
