"""Families whose attention constrains the backend (MLA, attention sinks), NVFP4 as
ModelOpt names it, sizes from a config alone, and broken configs. The backends are
those sglang's own overrides pick (0.5.23 model_overrides/deepseek_v2.py, gpt_oss.py)
and that every pinned wheel's asserts accept (tests/test_wheel_flags.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gpunode.errors import ResolveError
from gpunode.facts.model import parse_model
from gpunode.facts.types import Driver
from gpunode.resolve import resolve
from tests.unit.resolve_facts import DATA, QWEN36, field_notes, h200, on

R1 = (DATA / "models" / "deepseek-r1" / "config.json").read_text()


def config_only(text: str, name: str, index: str | None = None, quant: str | None = None):
    return parse_model(f"/models/{name}", f"{len(text)} ./config.json", text, index, quant, None)


def backend(plan) -> str:
    argv = plan.servers[0].argv
    return argv[argv.index("--attention-backend") + 1]


def test_deepseek_r1_from_its_config_alone_is_sized_and_tensor_parallel_on_b200():
    m = config_only(R1, "DeepSeek-R1")
    assert m.size_source.startswith("estimated from config.json: 682.6B parameters (680.6B fp8 x 1")
    plan = resolve(on("b200-x8", model=m))
    assert plan.topology.kind == "tensor-parallel" and plan.topology.tp == 8 and len(plan.servers) == 1
    assert backend(plan) == "trtllm_mla"   # never trtllm_mha: "can only be used with non-MLA models"
    assert "MLA" in plan.decision("attention backend").reason
    assert "estimated from config.json" in plan.decision("model size").reason


def test_deepseek_r1_on_eight_h100_does_not_fit_and_says_so():
    with pytest.raises(ResolveError) as info:
        resolve(on("h100-x8", model=config_only(R1, "DeepSeek-R1")))
    assert "does not fit on 8 GPU(s)" in info.value.message


def test_the_index_total_size_wins_over_the_estimate():
    index = json.dumps({"metadata": {"total_size": 688_586_727_753}, "weight_map": {"lm_head.weight": "a.safetensors"}})
    m = config_only(R1, "DeepSeek-R1", index=index)
    assert m.size_bytes == 688_586_727_753 and m.size_source == "model.safetensors.index.json metadata.total_size"


def test_mla_on_hopper_gets_fa3_and_a_user_choice_outside_the_family_rule_is_refused():
    facts = replace(h200(config_only(R1, "DeepSeek-R1")), gpus=h200().gpus * 8)
    facts = replace(facts, gpus=tuple(replace(g, index=i) for i, g in enumerate(facts.gpus)))
    assert backend(resolve(facts)) == "fa3"
    with pytest.raises(ResolveError) as info:
        resolve(facts, {"attention_backend": "trtllm_mha"})
    assert "only with fa3, flashinfer, triton" in str(info.value)


GPT_OSS = json.dumps({"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 2880,
                      "num_hidden_layers": 24, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
                      "intermediate_size": 2880, "num_local_experts": 32, "vocab_size": 201088,
                      "quantization_config": {"quant_method": "mxfp4"}})


@pytest.mark.parametrize("shape, expected", [("rtx-pro-6000-x8", "triton"), ("b200-x8", "trtllm_mha"),
                                             ("l4-x1", "triton")])
def test_gpt_oss_never_gets_flashinfer(shape, expected):
    m = config_only(GPT_OSS, "gpt-oss-20b")
    assert 10e9 < m.size_bytes < 14e9   # 20.9B parameters, MXFP4
    assert backend(resolve(on(shape, model=m))) == expected


@pytest.mark.parametrize("config, quant", [
    ({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}, None),
    ({"quantization_config": {"quant_method": "modelopt"}}, {"quantization": {"quant_algo": "NVFP4"}}),
    ({"quantization_config": {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
                              "quantized_layers": {"model.layers.0.mlp": {"quant_algo": "NVFP4"}}}}, None),
])
def test_modelopt_nvfp4_runs_on_hopper_only_where_the_pinned_sglang_allows_it(config, quant):
    text = json.dumps({"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5", **config})
    m = config_only(text, "Qwen3.6-27B-NVFP4", quant=json.dumps(quant) if quant else None)
    assert m.quantization == "nvfp4"
    model = replace(QWEN36, quantization=m.quantization, quantization_source=m.quantization_source)
    # ModelOptFp4Config.get_min_capability() is 80 in sglang 0.5.17 and 0.5.23 (a Marlin FP4 runner below 10.0)
    plan = resolve(h200(model))
    assert plan.engine_version in ("0.5.17", "0.5.23")
    assert "compute capability >= 8.0" in plan.decision("quantization floor").reason
    # ... and 100 in 0.5.12.post1
    with pytest.raises(ResolveError) as info:
        resolve(h200(model), {"pinset": "cu13-a"})
    assert "sglang 0.5.12.post1 runs modelopt_fp4 (nvfp4) from compute capability 10.0" in info.value.message


@pytest.mark.parametrize("text, words", [("", "config.json is empty"), ("{\"architectures\": [", "not valid JSON"),
                                         ("[1]", "holds a JSON list"), ("{}", "names no architectures")])
def test_a_broken_config_is_refused_naming_the_file(text, words):
    m = config_only(text, "broken")
    with pytest.raises(ResolveError) as info:
        resolve(field_notes(model=m))
    assert info.value.message.startswith("/models/broken: ") and words in info.value.message


def test_a_broken_index_is_refused_too():
    m = config_only(R1, "DeepSeek-R1", index="{\"metadata\": {}")
    with pytest.raises(ResolveError) as info:
        resolve(on("b200-x8", model=m, driver=Driver("580.95.05", "13.0")))
    assert "model.safetensors.index.json is not valid JSON" in info.value.message
