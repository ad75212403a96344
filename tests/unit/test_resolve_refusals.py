"""When nothing fits, or a user choice breaks a rule, the resolver refuses and
says what blocked it and what would unblock it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpunode.errors import InventoryError, ResolveError
from gpunode.facts.types import Driver
from gpunode.resolve import resolve
from tests.unit.resolve_facts import GB, KPRO6_CT, QWEN36, QWEN36_MTP, cpu_box, field_notes, h200, on


def refused(facts, variables=None) -> ResolveError:
    with pytest.raises(ResolveError) as info:
        resolve(facts, variables)
    return info.value


def test_driver_565_on_sm120_is_below_blackwells_own_floor():
    err = refused(field_notes(driver=Driver("565.57.01", "12.7")))
    assert err.message.startswith("driver 565.57.01 < 570 needed by every SGLang pin set that runs "
                                  "Qwen3.6-27B (Qwen3_5ForConditionalGeneration) on compute capability 12.0")
    assert "cu13-latest, cu13-b, cu13-a need 580" in err.message and "cu12-legacy needs 570" in err.message
    assert "upgrade the host's NVIDIA driver to >= 570 (>= 580 for the CUDA 13 pin sets)" in err.hint
    assert err.target == "kpro6/200"


def test_cuda13_below_580_is_refused_where_no_cuda12_stack_exists():
    """GB10 needs a CUDA 13 stack (cu130 wheels for sm121a), and CUDA 13.x needs a driver >= 580."""
    err = refused(on("gb10-x1", system=replace(KPRO6_CT, arch="aarch64"), driver=Driver("575.64.03", "12.9")))
    assert "driver 575.64.03 < 580" in err.message and "upgrade the host's NVIDIA driver to >= 580" in err.hint


def test_driver_below_the_cuda12_compatibility_floor():
    # GPU 1, the one without MIG: the driver floor, not the MIG split, is what this case is about
    err = refused(on("a100-x2-mig", driver=Driver("520.61.05", "11.8")), {"gpus": [1]})
    assert err.message.startswith("driver 520.61.05 < 525 needed by every SGLang pin set")
    assert "cu12-legacy needs 525" in err.message


def test_a_chosen_cuda13_pinset_on_driver_575_says_which_pinset_fits_instead():
    err = refused(on("b200-x8"), {"pinset": "cu13-latest"})
    assert err.message.startswith("cu13-latest (SGLang 0.5.23, chosen by the inventory) does not fit: "
                                  "driver 575.57.08 < 580")
    assert "upgrade the host's NVIDIA driver to >= 580" in err.hint
    assert "pinset: cu12-legacy" in err.hint


def test_glibc_too_old_for_every_pinset_that_runs_the_model():
    text_only = replace(QWEN36, architectures=("Qwen3_5ForCausalLM",))
    facts = field_notes(model=text_only, system=replace(KPRO6_CT, glibc="2.31"))
    err = refused(facts)
    assert err.message.startswith("glibc 2.31 < 2.34 needed by every SGLang pin set that runs")
    assert "Qwen3_5ForCausalLM" in err.message
    assert "glibc >= 2.34" in err.hint


def test_glibc_231_still_gets_the_pure_python_legacy_stack_for_qwen36():
    plan = resolve(field_notes(system=replace(KPRO6_CT, glibc="2.31")))
    assert plan.pinset == "cu12-legacy"
    assert "cu13-latest (glibc 2.31 < 2.34)" in plan.decision("pin set").reason


@pytest.mark.parametrize("shape, words, hint", [
    # a name the table cut short: the outputs that print it whole are what helps, not a gpus.yml row
    ("laptop-r470-truncated-name", "GPU 0 (NVIDIA GeForce ...) is unknown", "nvidia-smi -q"),
    ("gtx-980-r387", "GPU 0 (GeForce GTX 980) is unknown", "gpus.yml"),
])
def test_unknown_gpu(shape, words, hint):
    err = refused(on(shape))
    assert words in err.message and hint in err.hint


def test_a_gpu_no_pinned_wheel_has_code_for_is_refused_without_add_a_row():
    facts = on("h100-x8")
    gpus = tuple(replace(g, compute_cap="7.0", name="Tesla V100-SXM2-32GB") for g in facts.gpus)
    err = refused(replace(facts, gpus=gpus))
    assert "compute capability 7.0 (sm_70): no released wheel" in err.message
    assert "add a row" not in err.hint and "would not help" in err.hint and "8.0 or newer" in err.hint
    # the evidence is what the wheels hold (compat/kernel_sms.yml), not a sentence typed by hand
    assert "sglang-kernel 0.4.10 (x86_64: sm_80" in err.evidence and "vllm 0.20.1 (x86_64: sm_75" in err.evidence


def test_t4_has_no_sglang_kernel_but_vllm_has_sm75_code():
    facts = on("h100-x8")
    gpus = tuple(replace(g, compute_cap="7.5", name="Tesla T4") for g in facts.gpus)
    err = refused(replace(facts, gpus=gpus))
    assert "compute capability 7.5, which no row in gpus.yml describes" in err.message
    assert err.hint.startswith("only vllm can run on it (sglang: no pinned wheel has code for sm_75)")
    assert "engine: vllm" in err.hint and "sglang-kernel" not in err.evidence


def test_jetson_thor_has_kernel_code_on_aarch64_so_a_row_would_help():
    # sglang-kernel's aarch64 wheels (0.4.2.post2 on) hold sm_110a: a gpus.yml row is the missing piece.
    facts = on("h100-x8", system=replace(KPRO6_CT, arch=""))  # not probed: Thor's systems are aarch64
    gpus = tuple(replace(g, compute_cap="11.0", name="NVIDIA Thor") for g in facts.gpus[:1])
    err = refused(replace(facts, gpus=gpus))
    assert "compute capability 11.0, which no row in gpus.yml describes" in err.message
    assert "sglang-kernel 0.4.10 (aarch64)" in err.evidence and "sm_110a" in err.evidence
    assert "sglang-kernel 0.4.10 (x86_64)" not in err.evidence and "sglang, vllm" in err.hint


def test_mixed_architectures_ask_for_a_choice():
    err = refused(on("mixed-5090-4090"))
    assert "different architectures" in err.message and "gpus:" in err.hint


def test_python_outside_every_range():
    err = refused(field_notes(system=replace(KPRO6_CT, pythons=("3.9",), default_python="3.9")))
    assert "python 3.9" in err.message and "install a Python" in err.hint


def test_model_newer_than_every_pinset():
    future = replace(QWEN36, architectures=("Qwen3_5ForCausalLM",))
    err = refused(field_notes(model=future), {"engine_version": "0.5.12.post1"})
    assert "needs sglang >= 0.5.17" in err.message


def test_no_gpu_but_a_gpu_engine_forced():
    err = refused(cpu_box(), {"engine": "sglang"})
    assert "needs an NVIDIA GPU" in err.message and "vLLM CPU plan" in err.hint


@pytest.mark.parametrize("variables, words", [
    ({"attention_backend": "fa3"}, "attention_backend fa3: FA3 needs Hopper instructions"),
    ({"attention_backend": "fa4"}, "FA4 does not support SM120"),
    ({"extra_args": ["--mamba-scheduler-strategy", "no_buffer"]},
     "--mamba-scheduler-strategy does not exist in sglang 0.5.23"),
    ({"extra_args": ["--attention-backend", "triton"]}, "--attention-backend is set by the plan already"),
    ({"mtp": True}, "has no MTP weights"),
    ({"mamba_strategy": "extra_buffer_lazy", "pinset": "cu13-a"}, "does not exist in sglang 0.5.12.post1"),
    ({"tp": 16}, "tp: 16 but only 8 GPU(s)"),
    ({"pinset": "cu99"}, "pinset: cu99 is not in the knowledge base"),
    ({"engine_version": "0.4.0"}, "engine_version: 0.4.0 matches no sglang pin set"),
    ({"pinset": "vllm-cu13", "engine": "sglang"}, "is a vllm pin set but the engine is sglang"),
    ({"base_port": 29993}, "router_port 30000 collides"),
])
def test_user_choices_that_break_a_rule(variables, words):
    err = refused(field_notes(), variables)
    assert words in str(err)


def test_flashinfer_on_b200_is_refused_for_hybrid_models_only_in_the_versions_that_assert_it():
    facts = replace(on("b200-x8"), driver=Driver("580.95.05", "13.0"))
    err = refused(facts, {"pinset": "cu13-b", "attention_backend": "flashinfer"})
    assert "SGLang 0.5.17 accepts only triton, trtllm_mha, fa4 for hybrid Gated DeltaNet" in err.message
    plan = resolve(facts, {"pinset": "cu13-latest", "attention_backend": "flashinfer"})
    assert "flashinfer" in plan.servers[0].argv


def test_mtp_and_no_buffer_contradict():
    err = refused(h200(QWEN36_MTP), {"mamba_strategy": "no_buffer"})
    assert "speculative decoding needs extra_buffer" in err.message


def test_nvfp4_of_an_unknown_producer_on_hopper():
    # no quantization_source: not a ModelOpt checkpoint, so no floor read from the wheel; the GPU row decides
    err = refused(h200(replace(QWEN36, quantization="nvfp4")))
    assert "compute capability 9.0 cannot run nvfp4 checkpoints" in err.message


def test_weights_that_fit_on_no_number_of_gpus():
    err = refused(field_notes(model=replace(QWEN36, size_bytes=2000 * GB)))
    assert "does not fit on 8 GPU(s)" in err.message and "weights 1862.6 GiB" in err.message


@pytest.mark.parametrize("variables", [{"mem_fraction": 1.5}, {"context_length": "long"}, {"gpus": "x"},
                                       {"mtp": "maybe"}, {"extra_args": 3}, {"engine": "tgi"}])
def test_malformed_inventory_variables(variables):
    with pytest.raises(InventoryError) as info:
        resolve(field_notes(), variables)
    assert next(iter(variables)) in str(info.value)


def test_b300_is_not_planned_on_a_kernel_without_sm100f_or_sm103_code():
    # sglang-kernel 0.4.1 (cu12-legacy) holds sm_100a, which runs on 10.0 only; 0.4.10 holds sm_100f.
    facts = on("b200-x8")
    gpus = tuple(replace(g, compute_cap="10.3", name="NVIDIA B300 SXM6 AC") for g in facts.gpus)
    err = refused(replace(facts, gpus=gpus, driver=Driver("580.95.05", "13.0")), {"engine_version": "0.5.10.post1"})
    assert "sglang-kernel 0.4.1 has no code for compute capability 10.3" in err.message
    assert "sm_100a" in err.message and "kernel wheel has code" in err.hint
    assert resolve(replace(facts, gpus=gpus, driver=Driver("580.95.05", "13.0"))).pinset.startswith("cu13")
