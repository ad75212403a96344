"""The config estimate of every family it claims (model_parts.FAMILIES) against the published size.

Each folder's SOURCE names the config's origin and the published figure used here, with the page
it was read from: a parameter count (compared with the parameters counted from config.json), or
bytes on disk where a page gives them. The folders recorded before issue 28 have no such line;
their figures are the model cards' own (DeepSeek-V3/R1: 671B + 14B MTP; Kimi K2: 1.04T;
gpt-oss: 116.8B and 20.9B), written from those cards, not re-read here, or the pages named below.
A family without a recorded config and a figure here is not one the estimator may claim:
test_every_claimed_family_is_checked_here fails for it.
"""

from __future__ import annotations

import json

import pytest

from gpunode.facts import model_parts
from gpunode.facts.model import parse_model
from tests.unit.resolve_facts import DATA

MODELS = DATA / "models"


def folder_of(name: str):
    return MODELS / name

# folder: (published parameters, tolerance); tolerances say how close a count that leaves out
# norms, biases and scales (and, where noted in SOURCE, a tower the copy lacks) can be
PUBLISHED = {
    "deepseek-r1": (671e9 + 14e9, 0.01),          # 671B main model + 14B MTP module (model card)
    "deepseek-v3.2": (685e9, 0.01),
    "kimi-k2-instruct": (1.04e12, 0.02),
    "kimi-k2.5": (1.04e12, 0.03),
    "glm-5.1-fp8": (744e9, 0.03),                 # 744B without the MTP layer, which is counted here
    "gpt-oss-20b": (20.9e9, 0.02),
    "gpt-oss-120b": (116.8e9, 0.02),
    "llama-4-scout-17b-16e-instruct": (109e9, 0.02),
    "gemma-4-26b-a4b": (25.2e9, 0.02),
    "minimax-m2.5": (229.9e9, 0.01),
    "mimo-v2-flash": (309e9, 0.03),
    # codersera.com/blog/qwen3-vl-8b-instruct-vs-qwen3-vl-8b-thinking-2025-guide
    "qwen3-vl-8b-instruct": (8.77e9, 0.03),
    "qwen3-vl-30b-a3b-instruct": (31.1e9, 0.02),
    "qwen3-coder-480b-a35b-instruct": (480e9, 0.01),
    "qwen3-30b-a3b-fp8": (30.5e9, 0.01),
    "qwen3-32b-fp8": (32.8e9, 0.01),
    "qwen3-0.6b": (0.6e9, 0.01),
    "qwen3-next-80b-a3b-thinking": (80e9, 0.02),
    "qwen3.6-27b-nvfp4": (27.8e9, 0.03),          # its BF16 base is 55.6 GB (test_model_size.py)
    "qwen3.6-35b-a3b-nvfp4": (35e9, 0.04),   # "35B in total", rounded (mera.a-ai.ru/en/industrial/submits/181)
    "mixtral-8x7b-v0.1": (46.7e9, 0.01),
    "mixtral-8x22b-v0.1": (141e9, 0.01),
    "meta-llama-3.1-70b": (70.6e9, 0.01),
    "llama-3.1-70b-instruct-fp8": (70.6e9, 0.01),
    "llama-3.3-nemotron-super-49b-v1": (49e9, 0.025),  # "about 49B"
    "nemotron-h-56b-base-8k": (56e9, 0.03),
    "nemotron-3-nano-30b-a3b-bf16": (31.6e9, 0.01),
    "nemotron-3-super-120b-a12b-fp8": (120e9, 0.04),
    "glm-4.5-air": (106e9, 0.02),                 # 106B total, 12B active (its SOURCE)
    "qwen2.5-72b": (72.7e9, 0.01),
    "llama-4-maverick-17b-128e-instruct": (400e9, 0.01),   # MoE on every 2nd layer (interleave_moe_layer_step)
    # the second collection of issue 38 (their SOURCE): the model cards' "405B" and "235B in total, 22B activated"
    "meta-llama-3.1-405b": (405e9, 0.01),
    "qwen3-235b-a22b-fp8": (235e9, 0.01),
}


def config(name: str) -> dict:
    return json.loads((folder_of(name) / "config.json").read_text())


def model(name: str):
    folder = folder_of(name)
    text = (folder / "config.json").read_text()
    quant = folder / "hf_quant_config.json"
    return parse_model(f"/models/{name}", f"{len(text)} ./config.json", text, None,
                       quant.read_text() if quant.exists() else None, None)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_the_parameters_counted_from_config_json_are_the_published_count(name):
    published, within = PUBLISHED[name]
    counted = sum(n for _, n in model_parts.parts(config(name)))
    assert abs(counted - published) / published < within, f"{name}: {counted / 1e9:.1f}B counted"


def test_every_claimed_family_is_checked_here():
    checked = {model_parts.family(config(name)) for name in PUBLISHED}
    assert set(model_parts.FAMILIES) <= checked, set(model_parts.FAMILIES) - checked


# issue 38's newest configs of families whose shapes the estimate does not know (DeepSeek-V4's compressed
# attention, Kimi-K3, Step-3.7, GLM-4.7-Flash, Qwen3.8's text-only type, MiniMax-M3, Laguna, Muse): each has an
# unknown size, so a plan needs the index's total_size, the weights, or tp: (tests/unit/test_model_size_checkpoints.py)
UNSIZED = {"deepseek-v4-flash", "deepseek-v4-pro", "deepseek-v4-flash-nvfp4", "kimi-k3", "step-3.7-flash",
           "step-3.7-flash-fp8", "glm-4.7-flash", "qwen3.8-2.4t-a95b-fp8", "minimax-m3", "laguna-s-2.1-fp8",
           "muse-glimmer-30b",
           # the second collection of issue 38: DeepSeek-V4 in NVIDIA's NVFP4 and in sgl-project's FP8 (whose
           # config.json says model_type deepseek_ref), MiniMax-M3 in NVFP4 (minimax_m3_vl)
           "deepseek-v4-pro-nvfp4", "deepseek-v4-flash-fp8", "minimax-m3-nvfp4"}


def test_every_recorded_config_is_a_claimed_family_or_known_to_be_unsized():
    for folder in sorted(MODELS.iterdir()):
        if (folder / "config.json").exists():
            claimed = model_parts.family(config(folder.name)) in model_parts.FAMILIES
            assert claimed != (folder.name in UNSIZED), folder.name


@pytest.mark.parametrize(("name", "low", "high"), [
    # native INT4 experts (compressed-tensors, 4 bits + a bf16 scale per 32): Kimi-K2.6, the same
    # shapes and method, is "roughly 640GB (~10GB * 64 files, slightly less)" (SOURCE); BF16 would be 2 TB
    ("kimi-k2.5", 540e9, 640e9),
    # FP8 everywhere but embeddings, head, norms and routers: about a byte per parameter
    ("minimax-m2.5", 229e9, 236e9),
    ("deepseek-v3.2", 680e9, 700e9),
    ("llama-3.1-70b-instruct-fp8", 70.6e9, 75e9),
    ("qwen3-30b-a3b-fp8", 30.5e9, 32.5e9),
    # BF16: two bytes per parameter
    ("nemotron-3-nano-30b-a3b-bf16", 62e9, 64.5e9),
    ("llama-3.3-nemotron-super-49b-v1", 98e9, 101e9),
])
def test_the_bytes_follow_each_modules_format(name, low, high):
    m = model(name)
    assert low <= m.size_bytes <= high, (m.size_bytes / 1e9, m.size_source)


def test_an_fp8_repository_named_only_by_hf_quant_config_is_sized_as_fp8_and_says_so():
    m = model("llama-3.1-70b-instruct-fp8")
    assert "quantization_config" not in config("llama-3.1-70b-instruct-fp8")
    assert m.quantization == "fp8" and "hf_quant_config.json" in m.size_source


def test_a_family_the_estimator_does_not_know_has_an_unknown_size_not_a_guess():
    c = {**config("meta-llama-3.1-70b"), "model_type": "brand_new_arch", "architectures": ["BrandNewForCausalLM"]}
    text = json.dumps(c)
    m = parse_model("/models/new", f"{len(text)} ./config.json", text, None, None, None)
    assert m.size_bytes == 0 and m.size_source.startswith("unknown size"), m.size_source
    assert "brand_new_arch" in m.size_source
