"""How big a model's weights are when only its config (and maybe its index) is there.

Order: the index's metadata.total_size (the bytes of every tensor, written by the
exporter); else parameters counted from config.json (embeddings, attention with
MLA or grouped KV heads, dense and MoE MLPs, the LM head) times the bytes per
parameter of its dtype or quantization. The count is an estimate (norms, biases
and scales are left out, under 1 %); the source string says which was used.
"""

from __future__ import annotations

from typing import Any

# bytes per parameter: quantized formats carry block scales (NVFP4: one FP8 scale per 16
# values, MXFP4: one E8M0 scale per 32), hence the fractions above 0.5
BYTES = {"nvfp4": 0.5625, "mxfp4": 0.53125, "fp4": 0.5625, "awq": 0.5, "gptq": 0.5, "int4": 0.5,
         "fp8": 1.0, "int8": 1.0, "bfloat16": 2.0, "float16": 2.0, "bf16": 2.0, "fp16": 2.0, "float32": 4.0}


def _text(config: dict[str, Any]) -> dict[str, Any]:
    t = config.get("text_config")
    return {**config, **t} if isinstance(t, dict) else config


def _int(c: dict[str, Any], *keys: str) -> int:
    for k in keys:
        v = c.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return 0


def parameters(config: dict[str, Any]) -> int:
    """Parameters of the language model counted from config.json; 0 when it lacks the shapes."""
    c = _text(config)
    hidden, layers, vocab = _int(c, "hidden_size", "d_model"), _int(c, "num_hidden_layers", "n_layer"), \
        _int(c, "vocab_size")
    if not (hidden and layers and vocab):
        return 0
    heads = _int(c, "num_attention_heads") or 1
    kv_heads = _int(c, "num_key_value_heads") or heads
    head_dim = _int(c, "head_dim") or hidden // heads
    if _int(c, "kv_lora_rank"):   # multi-head latent attention (DeepSeek V2/V3, Kimi K2)
        rank, q_rank = _int(c, "kv_lora_rank"), _int(c, "q_lora_rank")
        nope, rope, v = _int(c, "qk_nope_head_dim"), _int(c, "qk_rope_head_dim"), _int(c, "v_head_dim")
        q = hidden * q_rank + q_rank * heads * (nope + rope) if q_rank else hidden * heads * (nope + rope)
        attn = q + hidden * (rank + rope) + rank * heads * (nope + v) + heads * v * hidden
    else:
        attn = hidden * head_dim * (heads + 2 * kv_heads) + heads * head_dim * hidden
    dense = 3 * hidden * _int(c, "intermediate_size", "ffn_dim")
    experts = _int(c, "n_routed_experts", "num_experts", "num_local_experts")
    moe_layers = 0
    moe = 0
    if experts:
        inter = _int(c, "moe_intermediate_size", "intermediate_size")
        shared = 3 * hidden * (_int(c, "n_shared_experts") * inter + _int(c, "shared_expert_intermediate_size"))
        moe = experts * 3 * hidden * inter + shared + hidden * experts
        moe_layers = layers - _int(c, "first_k_dense_replace")
    embed = vocab * hidden * (1 if c.get("tie_word_embeddings") else 2)
    return embed + layers * attn + moe_layers * moe + (layers - moe_layers) * dense


def estimate(config: dict[str, Any], index: dict[str, Any] | None, quantization: str | None,
             dtype: str) -> tuple[int, str]:
    """(bytes, how they were found); (0, why not) when neither the index nor the config tells."""
    total = (index or {}).get("metadata", {}).get("total_size") if isinstance((index or {}).get("metadata"),
                                                                              dict) else None
    if isinstance(total, int) and total > 0:
        return total, "model.safetensors.index.json metadata.total_size"
    n = parameters(config)
    if not n:
        return 0, "config.json lacks the shapes to count parameters"
    kind = (quantization or dtype or "bfloat16").lower()
    per = BYTES.get(kind, 2.0)
    return int(n * per), (f"estimated from config.json: {n / 1e9:.1f}B parameters x {per:g} bytes "
                          f"({kind}{'' if kind in BYTES else ', assumed 2'})")
