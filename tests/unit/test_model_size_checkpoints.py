"""Sizes from what a checkpoint's config says about its own format (issue 38 item 5): GPTQ/AWQ bits and
group size, compressed-tensors groups by regex target, Nemotron-H as transformers v5 writes it
(layers_block_type) and under its own "backbone." prefix, Gemma 4's dense MLP beside its experts, Llama 4
Maverick's MoE on every second layer, and the index's total_size over any estimate. The configs are the
recorded ones in tests/data/models (each SOURCE says where it came from)."""

from __future__ import annotations

import json

import pytest

from gpunode.facts import model_parts, model_size
from gpunode.facts.model import parse_model, quantization
from tests.unit.resolve_facts import DATA

MODELS = DATA / "models"


def folder(name: str):
    return MODELS / name


def config(name: str) -> dict:
    return json.loads((folder(name) / "config.json").read_text())


def hf_quant(name: str) -> dict | None:
    path = folder(name) / "hf_quant_config.json"
    return json.loads(path.read_text()) if path.exists() else None


def estimate(c: dict, hq: dict | None = None) -> tuple[int, str]:
    return model_size.estimate(c, None, quantization(c, hq), str(c.get("torch_dtype") or c.get("dtype") or ""), hq)


# LLaMA-30B's shapes (the LLaMA paper's 32.5B model: dim 6656, 52 heads, 60 layers, FFN 17920, 32000 tokens)
# and what its GPTQ checkpoints weigh on disk, per https://github.com/oobabooga/textgen/pull/530 (comment by
# EyeDeck, 2023-03-27): 14,005,941,432 bytes at 3 bits in groups of 128, 17,297,668,844 at 3 bits in groups of
# 32, 18,050,060,784 at 4 bits in groups of 128
LLAMA_30B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 6656,
             "intermediate_size": 17920, "num_attention_heads": 52, "num_hidden_layers": 60, "vocab_size": 32000,
             "torch_dtype": "float16", "tie_word_embeddings": False}


@pytest.mark.parametrize(("method", "bits", "group", "on_disk"), [
    ("gptq", 3, 128, 14_005_941_432), ("gptq", 3, 32, 17_297_668_844), ("gptq", 4, 128, 18_050_060_784),
])
def test_gptq_size_follows_its_bits_and_group_size(method, bits, group, on_disk):
    c = {**LLAMA_30B, "quantization_config": {"quant_method": method, "bits": bits, "group_size": group}}
    size, source = estimate(c)
    assert abs(size - on_disk) / on_disk < 0.03, (size, on_disk)
    assert f"int{bits}/{group}" in source


def test_three_bit_gptq_is_not_counted_as_four_bit():
    three, _ = estimate({**LLAMA_30B, "quantization_config": {"quant_method": "gptq", "bits": 3, "group_size": 128}})
    four, _ = estimate({**LLAMA_30B, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}})
    assert three < 0.8 * four


def test_awq_keys_give_the_same_size_as_gptqs():
    awq = {"quant_method": "awq", "w_bit": 4, "q_group_size": 128, "zero_point": True, "version": "GEMM"}
    gptq = {"quant_method": "gptq", "bits": 4, "group_size": 128}
    assert estimate({**LLAMA_30B, "quantization_config": awq})[0] == \
        estimate({**LLAMA_30B, "quantization_config": gptq})[0]


def test_compressed_tensors_regex_targets_are_matched_like_module_names():
    # Kimi-K2.5's INT4 group on every Linear but the ignored ones, written as a regex over its routed experts
    recorded = config("kimi-k2.5")
    by_class = estimate(recorded)[0]
    changed = json.loads(json.dumps(recorded))
    changed["text_config"]["quantization_config"]["config_groups"]["group_0"]["targets"] = ["re:.*mlp\\.experts.*"]
    by_regex, source = estimate(changed)
    assert abs(by_regex - by_class) / by_class < 0.01 and "int4/32" in source
    assert by_regex < 0.35 * 2 * 1.03e12, "INT4 experts, not BF16"


@pytest.mark.parametrize("bits", [2, 3, 8])
def test_a_compressed_tensors_integer_group_is_counted_at_its_own_num_bits(bits):
    # Kimi-K2.5's recorded INT4 group (groups of 32) with num_bits changed: the experts' bytes follow num_bits
    recorded = config("kimi-k2.5")
    four, _ = estimate(recorded)
    changed = json.loads(json.dumps(recorded))
    changed["text_config"]["quantization_config"]["config_groups"]["group_0"]["weights"]["num_bits"] = bits
    size, source = estimate(changed)
    assert f"int{bits}/32" in source
    # the quantized part moves by (bits - 4) / 8 bytes a weight; the rest (BF16 attention, embeddings) stays
    quantized = float(source.split(f"B int{bits}/32")[0].rsplit("(", 1)[1])
    assert abs((size - four) - quantized * 1e9 * (bits - 4) / 8) / four < 0.01


def test_a_per_channel_integer_group_of_an_odd_width_is_sized_not_a_key_error():
    # the same group written per channel (no group_size), at 3 bits: no table row for "int3", its own rate
    changed = json.loads(json.dumps(config("kimi-k2.5")))
    weights = changed["text_config"]["quantization_config"]["config_groups"]["group_0"]["weights"]
    weights.update(num_bits=3, group_size=None, strategy="channel")
    size, source = estimate(changed)
    assert "int3 x 0.375" in source and size < estimate(config("kimi-k2.5"))[0]


def test_nemotron_h_block_lists_count_like_the_pattern_they_replace():
    nano = config("nemotron-3-nano-30b-a3b-bf16")
    names = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    v5 = {k: v for k, v in nano.items() if k not in ("hybrid_override_pattern", "num_hidden_layers")}
    v5["layers_block_type"] = [names[ch] for ch in nano["hybrid_override_pattern"]]
    assert estimate(v5)[0] == estimate(nano)[0]


def test_nemotron_3_5_lightning_is_counted_from_its_block_list_and_its_backbone_prefixed_nvfp4_layers():
    name = "nemotron-3.5-lightning-30b-a3b-nvfp4"
    c = config(name)
    assert "layers_block_type" in c and "hybrid_override_pattern" not in c
    params = sum(n for _, n in model_parts.parts(c))
    assert 28e9 < params < 36e9, f"{params / 1e9:.1f}B for a 30B-A3B model (104B before the block list was read)"
    size, source = estimate(c, hf_quant(name))
    assert size < 0.4 * 2 * params and "nvfp4" in source, source   # ModelOpt names its layers backbone.layers.N


def test_nemotron_3_ultra_is_sized_from_its_block_list():
    params = sum(n for _, n in model_parts.parts(config("nemotron-3-ultra-550b-a55b-fp8")))
    assert abs(params - 550e9) / 550e9 < 0.03     # its name's 550B; unknown before (no num_hidden_layers)


def test_gemma4_nvfp4_quantizes_the_experts_and_keeps_the_dense_mlp_its_exclusions_name():
    name = "gemma-4-26b-a4b-nvfp4"
    size, source = estimate(config(name), hf_quant(name))
    assert size < 20e9 and "nvfp4" in source, source    # 50 GB before: every expert counted as excluded BF16


def test_llama4_maverick_has_moe_on_every_second_layer():
    params = sum(n for _, n in model_parts.parts(config("llama-4-maverick-17b-128e-instruct")))
    assert abs(params - 400e9) / 400e9 < 0.01     # 784B before: every layer counted as MoE


def test_glm4_moe_is_plannable_from_its_config():
    size, source = estimate(config("glm-4.5-air"))
    assert size and source.startswith("estimated from config.json: 106.9B parameters")


def test_the_index_total_size_wins_over_the_estimate_for_an_unknown_family():
    text = (folder("deepseek-v4-flash") / "config.json").read_text()
    bare = parse_model("/m/dsv4", f"{len(text)} ./config.json", text, None, None, None)
    assert not bare.size_bytes and bare.size_source.startswith("unknown size")
    index = json.dumps({"metadata": {"total_size": 284_000_000_000}, "weight_map": {"a": "model-1.safetensors"}})
    sized = parse_model("/m/dsv4", f"{len(text)} ./config.json", text, index, None, None)
    assert sized.size_bytes == 284_000_000_000
    assert sized.size_source == "model.safetensors.index.json metadata.total_size"
