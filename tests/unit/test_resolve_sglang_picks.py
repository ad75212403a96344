"""Where SGLang's own choice (derived from the pinned wheel by `inv kb.refresh`) holds, gpunode passes no
--attention-backend; where a gpus.yml rule says that choice fails on the hardware, it passes its own.

The picks are injected into the KB here so that the rule is tested apart from what today's derived
file holds (tests/test_sglang_judge.py checks the file against the wheels).
"""

from __future__ import annotations

from dataclasses import replace

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


def test_sglangs_pick_that_a_rule_says_fails_is_overridden_with_the_reason():
    # triton on sm_120 carries gpus.yml's shared-memory warning (field notes): gpunode passes flashinfer
    kb = with_pick("cu13-latest", "12.0", "triton")
    plan = resolve(field_notes(), kb=kb)
    assert flags_of(plan.servers[0].argv)["--attention-backend"] == "flashinfer"
    reason = plan.decision("attention backend").reason
    assert "would pick triton itself here" in reason and "shared memory" in reason


def test_a_backend_the_rows_do_not_list_is_sglangs_business_for_a_dense_model():
    """DeepSeek-V3.2 picks dsa on Blackwell: not a gpus.yml backend, and no rule says it fails."""
    kb = with_pick("cu13-latest", "10.0", "dsa", arch="Qwen3ForCausalLM")
    facts = on("b200-x8", model=replace(field_notes().model, architectures=("Qwen3ForCausalLM",),
                                         model_type="qwen3", hybrid_linear_attention=False))
    facts = replace(facts, driver=Driver("580.95.05", "13.0"))    # the recorded B200 has 575
    plan = resolve(facts, {"pinset": "cu13-latest"}, kb=kb)
    assert "--attention-backend" not in plan.servers[0].argv


def test_without_derived_data_the_architecture_default_is_passed():
    plan = resolve(field_notes(), kb=replace(KB, sglang_picks={}))
    assert flags_of(plan.servers[0].argv)["--attention-backend"] == "flashinfer"


def test_the_inventorys_choice_still_wins_over_sglangs():
    kb = with_pick("cu13-latest", "12.0", "flashinfer")
    plan = resolve(field_notes(), {"attention_backend": "trtllm_mha"}, kb=kb)
    assert flags_of(plan.servers[0].argv)["--attention-backend"] == "trtllm_mha"
