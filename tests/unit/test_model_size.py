"""Sizes estimated from config.json alone, against what the real checkpoints weigh.

The reference sizes: gpt-oss-20b's index total_size (tests/data/models/gpt-oss-20b/SOURCE);
DeepSeek-V3/R1's 688,586,727,753 bytes (both share one shape; the V3 repository's
tree size as a public research note records it, found with the code search corpus);
nvidia/Qwen3.6-27B-NVFP4 "about 22GB of weights" with MLPs in NVFP4 and attention in
FP8 (https://thakicloud.github.io/en/llmops/qwen3-6-27b-nvfp4-vllm-blackwell/) and its
BF16 base at 55.6 GB (https://friendli.ai/models/natfii/Qwen3.6-27B-VLM-NVFP4-MTP);
Qwen3-Next-80B-A3B's "80B in total" from its model card.
"""

from __future__ import annotations

import json

import pytest

from gpunode.facts import model_size
from gpunode.facts.model import parse_model
from tests.unit.resolve_facts import DATA

MODELS = DATA / "models"


def sized(name: str, drop_quant: bool = False):
    folder = MODELS / name
    config = json.loads((folder / "config.json").read_text())
    quant_file = folder / "hf_quant_config.json"
    quant = quant_file.read_text() if quant_file.exists() and not drop_quant else None
    if drop_quant:
        config.pop("quantization_config", None)
    text = json.dumps(config)
    return parse_model(f"/models/{name}", f"{len(text)} ./config.json", text, None, quant, None)


@pytest.mark.parametrize(("name", "real", "within"), [
    ("gpt-oss-20b", 13_761_264_768, 0.01),
    ("deepseek-r1", 688_586_727_753, 0.015),
    ("qwen3.6-27b-nvfp4", 22e9, 0.08),
])
def test_a_config_alone_gives_the_size_the_real_checkpoint_has(name, real, within):
    m = sized(name)
    assert m.size_source.startswith("estimated from config.json")
    assert abs(m.size_bytes - real) / real < within, (m.size_bytes, m.size_source)


def test_mxfp4_applies_to_gpt_oss_experts_only_the_rest_is_bf16():
    m = sized("gpt-oss-20b")
    # counting every parameter at MXFP4 would say 11.1 GB and under-plan the memory by 2.6 GB
    assert "19.1B mxfp4" in m.size_source and "1.8B bfloat16" in m.size_source


def test_modelopt_mixed_precision_sizes_each_module_by_its_own_format():
    m = sized("qwen3.6-27b-nvfp4")
    assert "nvfp4" in m.size_source and "fp8" in m.size_source and "bfloat16" in m.size_source
    base = sized("qwen3.6-27b-nvfp4", drop_quant=True)   # the same shapes in BF16
    assert abs(base.size_bytes - 55.6e9) / 55.6e9 < 0.03, base.size_source
    assert base.size_bytes > 2.3 * m.size_bytes


def test_linear_attention_layers_are_counted_by_their_own_shape():
    m = sized("qwen3-next-80b-a3b-thinking")
    params = m.size_bytes / 2   # bf16
    assert 78e9 < params < 82e9, m.size_source


def test_a_quantization_the_estimator_does_not_know_is_counted_at_the_dtype_and_said():
    config = json.loads((MODELS / "qwen3-vl-8b-instruct" / "config.json").read_text())
    size, source = model_size.estimate(config, None, "hqq-2bit", "bfloat16")
    plain, _ = model_size.estimate(config, None, None, "bfloat16")
    assert size == plain and "quantization 'hqq-2bit' not known, counted as bfloat16" in source


def test_the_vision_tower_is_part_of_the_size():
    config = json.loads((MODELS / "qwen3-vl-8b-instruct" / "config.json").read_text())
    with_tower, _ = model_size.estimate(config, None, None, "bfloat16")
    without, _ = model_size.estimate({k: v for k, v in config.items() if k != "vision_config"}, None, None,
                                     "bfloat16")
    assert 0.5e9 < (with_tower - without) / 2 < 0.7e9   # Qwen3-VL's ViT: ~0.6B parameters
