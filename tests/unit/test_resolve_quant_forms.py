"""What each pin set's sglang says of a checkpoint's quantization form decides, as the derived data has it
(compat/derived/sglang-choices.yml, `architecture[form]`, judge/derive.py references): issue 38's configs in
CI's judge. The configs are the recorded real ones of tests/data/models (each folder's SOURCE), the GPUs
the recorded nvidia-smi reports of tests/data/nvidia-smi.

What CI's judge found when these configs joined it (tests/data/models/README.md): sglang 0.5.23 fails on
NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4 as recorded (MIXED_PRECISION named in hf_quant_config.json
only; its Nemotron-H overrides read config.json's quantization_config, srt/arg_groups/model_overrides/
nemotron_h.py:69), and sglang 0.5.10.post1 refuses trtllm_mha prefill on Hopper for GLM-4.5-Air and
Qwen2.5-72B, architectures the derived data did not hold before."""

from __future__ import annotations

import pytest

from gpunode.errors import ResolveError
from gpunode.judge import derive
from gpunode.resolve import resolve
from tests.unit.resolve_facts import DATA
from tests.unit.test_resolve_registry import DRIVER_580, KB, SGLANG, facts, refused

LIGHTNING = "nemotron-3.5-lightning-30b-a3b-nvfp4"
FORM = "mixed_precision, hf_quant_config.json only"


def test_each_quantization_form_of_an_architecture_is_a_reference_of_its_own():
    keys = {r.key: r.folder.name for r in derive.references(DATA / "models")}
    assert keys["NemotronHForCausalLM"] == "nemotron-3-nano-30b-a3b-bf16"
    assert keys[f"NemotronHForCausalLM[{FORM}]"] == LIGHTNING
    assert keys["Qwen3_5MoeForConditionalGeneration[mixed_precision]"] == "qwen3.6-35b-a3b-nvfp4"
    # a form like the architecture's first config's is that reference's: no second one
    assert "LlamaForCausalLM[fp8]" not in keys and keys["LlamaForCausalLM"] == "llama-3.1-70b-instruct-fp8"


@pytest.mark.parametrize("pinset", [p.id for p in SGLANG])
def test_a_pin_set_whose_sglang_fails_on_the_checkpoints_form_is_refused_with_its_message(pinset):
    # on a B200: every pin set runs this NVFP4 there, so what decides is what sglang says of the form
    # (on Hopper 0.5.12.post1's modelopt_fp4 floor, 10.0, refuses it first)
    said = KB.sglang_pick(pinset, "NemotronHForCausalLM", "10.0", "nemotron_h", FORM)
    assert said is not None, "the derived data judged this form"
    f = facts(LIGHTNING, "b200-x8", DRIVER_580)
    if said.get("rejected"):
        err = refused(f, {"pinset": pinset})
        assert f"sglang {KB.pinset(pinset).version} refuses NemotronHForCausalLM" in err.message
        assert "nemotron_h.py:69" in err.message and "quantization_config" in err.message
    else:
        assert resolve(f, {"pinset": pinset}).pinset == pinset
    # the BF16 reference of the same architecture is what sglang reads on every pin set
    assert not (KB.sglang_pick(pinset, "NemotronHForCausalLM", "10.0") or {}).get("rejected")


def test_nvfp4_named_the_same_way_is_another_form_that_every_pin_set_reads():
    """NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4 names its NVFP4 in hf_quant_config.json only too, but as NVFP4, not
    MIXED_PRECISION: 0.5.23's overrides reach line 69 only for modelopt_mixed, so its plans stand."""
    nano = "nemotron-3-nano-30b-a3b-nvfp4"
    assert facts(nano, "h200-x1").model.quantization_form == "nvfp4, hf_quant_config.json only"
    for p in SGLANG:
        said = KB.sglang_pick(p.id, "NemotronHForCausalLM", "10.0", "nemotron_h", "nvfp4, hf_quant_config.json only")
        assert said is not None and not said.get("rejected"), (p.id, said)
    assert resolve(facts(nano, "b200-x8", DRIVER_580), {"pinset": "cu13-latest"}).pinset == "cu13-latest"


def test_left_to_choose_the_resolver_skips_the_pin_sets_that_fail_on_the_form():
    f = facts(LIGHTNING, "h200-x1", DRIVER_580)
    failing = [p.id for p in SGLANG if (KB.sglang_pick(p.id, "NemotronHForCausalLM", "9.0", "nemotron_h", FORM)
                                        or {}).get("rejected")]
    assert failing, "no pin set fails on it: this test checks nothing"
    plan = resolve(f)
    assert plan.pinset not in failing


@pytest.mark.parametrize("name", ["glm-4.5-air", "qwen2.5-72b"])
def test_trtllm_mha_on_hopper_is_refused_where_that_sglang_rejects_it_for_the_architecture(name):
    f = facts(name, "h100-x8", DRIVER_580)
    arch = f.model.architectures[0]
    for p in SGLANG:
        rejects = (KB.sglang_pick(p.id, arch, "9.0") or {}).get("rejects") or {}
        message = rejects.get("--attention-backend trtllm_mha")
        try:
            plan = resolve(f, {"pinset": p.id, "attention_backend": "trtllm_mha"})
        except ResolveError as err:
            assert message is not None or "trtllm_mha" in err.message, (p.id, err.message)
            if message:
                assert message in err.message
            continue
        assert message is None, f"{p.id}: planned trtllm_mha although sglang {p.version} rejects it: {message}"
        assert "trtllm_mha" in plan.servers[0].args


@pytest.mark.parametrize("shape", ["h100-x8", "rtx-pro-6000-x8"])
def test_trtllm_mha_prefill_before_0_5_23_is_refused_off_sm100_for_an_architecture_never_judged(shape):
    """gpus.yml's `refused` rows (each pinned wheel's server_args.py raises for every architecture), so a model
    whose architecture the derived data lacks is refused too: here none is derived at all."""
    from dataclasses import replace

    bare = replace(KB, sglang_picks={})
    f = facts("qwen2.5-72b", shape, DRIVER_580)
    for p in SGLANG:
        variables = {"pinset": p.id, "attention_backend": "trtllm_mha"}
        if p.version == "0.5.23":
            assert "trtllm_mha" in resolve(f, variables, kb=bare).servers[0].args
        else:
            err = refused(f, variables, kb=bare)
            assert f"SGLang {p.version} refuses it" in err.message
            assert "TRTLLM MHA backend for prefill is only supported on Blackwell GPUs (SM100)" in err.message
