"""The weight-bearing parts of a model, counted from its config.json alone.

Each part is a module name in the checkpoint's own naming, without the wrapper
prefix ("model.", "model.language_model."), and its parameter count: the
embeddings, the LM head, per layer the attention projections (grouped-KV,
gated, multi-head latent, or linear attention), the MLP or the routed experts
with their shared expert and router, the MTP layers and a vision tower. Names
matter because quantized checkpoints give a precision per module, so the size
of a mixed-precision model is the sum over parts of parameters x bytes of that
part's format. Norms, biases and scales are left out (under 1 %).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Part = tuple[str, int]

# The families whose shapes parts() knows, by config.json's model_type; each has a recorded config
# whose count tests/unit/test_model_size_published.py checks against the published one. Any other
# family has an unknown size: a count from shape keys it does not know could be far too small.
FAMILIES = {
    "llama": "Llama 3.x", "mixtral": "Mixtral", "llama4": "Llama 4 (shared expert per MoE layer)",
    "qwen3": "Qwen3", "qwen3_moe": "Qwen3 MoE", "qwen3_next": "Qwen3-Next", "qwen3_vl": "Qwen3-VL",
    "qwen3_vl_moe": "Qwen3-VL MoE", "qwen3_5": "Qwen3.5/3.6", "qwen3_5_moe": "Qwen3.5/3.6 MoE",
    "deepseek_v3": "DeepSeek V3/R1", "deepseek_v32": "DeepSeek V3.2", "kimi_k2": "Kimi K2",
    "kimi_k25": "Kimi K2.5", "glm_moe_dsa": "GLM-5", "glm4_moe": "GLM-4.5/4.6/4.7",
    "qwen2": "Qwen2.5", "gpt_oss": "gpt-oss", "gemma4": "Gemma 4",
    "minimax_m2": "MiniMax-M2", "mimo_v2_flash": "MiMo-V2-Flash",
    "nemotron_h": "Nemotron-H (hybrid_override_pattern: Mamba-2, attention, MLP, MoE layers)",
    "nemotron-nas": "DeciLM / Llama-Nemotron NAS (block_configs)",
}


def family(config: dict[str, Any]) -> str:
    return str(config.get("model_type") or text_config(config).get("model_type") or "")


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's keys: a multimodal wrapper's text_config over the top level."""
    t = config.get("text_config")
    return {**config, **t} if isinstance(t, dict) else config


# Far above any real dimension (vocabularies reach ~10^6, layers ~10^2); a config past these is
# not sized from its shapes, rather than counted for minutes or into an overflowing float.
MAX_DIM = 1 << 24
MAX_LAYERS = 4096


def num(c: dict[str, Any], *keys: str) -> int:
    for k in keys:
        v = c.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_DIM:
            return v
    return 0


def parts(config: dict[str, Any]) -> list[Part]:
    """Every part with its parameters; [] when the config lacks the shapes."""
    c = hybrid_pattern(text_config(config))
    hidden, layers, vocab = num(c, "hidden_size", "d_model"), num(c, "num_hidden_layers", "n_layer"), \
        num(c, "vocab_size")
    if not (hidden and layers and vocab) or layers > MAX_LAYERS:
        return []
    out: list[Part] = [("embed_tokens", vocab * hidden)]
    if not c.get("tie_word_embeddings"):
        out.append(("lm_head", vocab * hidden))
    if isinstance(c.get("hybrid_override_pattern"), str):
        out += nemotron_h(c)
    elif isinstance(c.get("block_configs"), list):
        out += decilm(c)
    else:
        kinds = _layer_kinds(c, layers)
        for i in range(layers):
            out += _attention(c, f"layers.{i}", kinds[i])
            out += _mlp(c, f"layers.{i}", i)
        out += _mtp(c, layers)
    vision = config.get("vision_config")
    if isinstance(vision, dict):
        out += _vision(vision, hidden)
    return out


# Nemotron-H as transformers v5 writes it: a block name per layer (layers_block_type) in place of
# hybrid_override_pattern's characters, the MTP layers' in mtp_layers_block_type (mlx-lm's and
# Megatron-Bridge's readers map them the same way)
_BLOCKS = {"mamba": "M", "linear_attention": "M", "attention": "*", "full_attention": "*", "mlp": "-", "moe": "E"}


def hybrid_pattern(c: dict[str, Any]) -> dict[str, Any]:
    """c with hybrid_override_pattern (and its MTP one) from layers_block_type lists, when those are given."""
    blocks = c.get("layers_block_type")
    if str(c.get("model_type", "")) != "nemotron_h" or isinstance(c.get("hybrid_override_pattern"), str) or \
            not isinstance(blocks, list) or not all(str(b) in _BLOCKS for b in blocks):
        return c
    out = {**c, "hybrid_override_pattern": "".join(_BLOCKS[str(b)] for b in blocks)}
    out.setdefault("num_hidden_layers", len(blocks))
    mtp = c.get("mtp_layers_block_type")
    if isinstance(mtp, list) and all(str(b) in _BLOCKS for b in mtp):
        out.setdefault("mtp_hybrid_override_pattern", "".join(_BLOCKS[str(b)] for b in mtp))
    return out


def _layer_kinds(c: dict[str, Any], layers: int) -> list[str]:
    """'linear' or 'full' per layer: layer_types when given, else every full_attention_interval-th is full."""
    types = c.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        return ["linear" if "linear" in str(t) or "delta" in str(t) else "full" for t in types]
    every = num(c, "full_attention_interval")
    if every and num(c, "linear_num_value_heads"):
        return ["full" if (i + 1) % every == 0 else "linear" for i in range(layers)]
    return ["full"] * layers


def _attention(c: dict[str, Any], at: str, kind: str) -> Iterator[Part]:
    hidden = num(c, "hidden_size", "d_model")
    heads = num(c, "num_attention_heads") or 1
    if kind == "linear":
        yield from _linear_attention(c, f"{at}.linear_attn", hidden)
        return
    a = f"{at}.self_attn"
    if num(c, "kv_lora_rank"):   # multi-head latent attention (DeepSeek V2/V3, Kimi K2)
        rank, q_rank = num(c, "kv_lora_rank"), num(c, "q_lora_rank")
        nope, rope, v = num(c, "qk_nope_head_dim"), num(c, "qk_rope_head_dim"), num(c, "v_head_dim")
        if q_rank:
            yield f"{a}.q_a_proj", hidden * q_rank
            yield f"{a}.q_b_proj", q_rank * heads * (nope + rope)
        else:
            yield f"{a}.q_proj", hidden * heads * (nope + rope)
        yield f"{a}.kv_a_proj_with_mqa", hidden * (rank + rope)
        yield f"{a}.kv_b_proj", rank * heads * (nope + v)
        yield f"{a}.o_proj", heads * v * hidden
        return
    kv = num(c, "num_key_value_heads") or heads
    head_dim = num(c, "head_dim") or hidden // heads
    # gated attention (Qwen3-Next, Qwen3.5/3.6) doubles q_proj: a gate per query channel
    gated = bool(c.get("attn_output_gate")) or str(c.get("model_type", "")).startswith("qwen3_next")
    yield f"{a}.q_proj", hidden * heads * head_dim * (2 if gated else 1)
    yield f"{a}.k_proj", hidden * kv * head_dim
    yield f"{a}.v_proj", hidden * kv * head_dim
    yield f"{a}.o_proj", heads * head_dim * hidden


def _linear_attention(c: dict[str, Any], a: str, hidden: int) -> Iterator[Part]:
    """Gated DeltaNet: Qwen3-Next fuses q,k,v,z (and b,a) into one projection, Qwen3.5/3.6 splits them."""
    nk, nv = num(c, "linear_num_key_heads"), num(c, "linear_num_value_heads")
    kd, vd = nk * num(c, "linear_key_head_dim"), nv * num(c, "linear_value_head_dim")
    if str(c.get("model_type", "")).startswith("qwen3_next"):
        yield f"{a}.in_proj_qkvz", hidden * (2 * kd + 2 * vd)
        yield f"{a}.in_proj_ba", hidden * 2 * nv
    else:
        yield f"{a}.in_proj_qkv", hidden * (2 * kd + vd)
        yield f"{a}.in_proj_z", hidden * vd
        yield f"{a}.in_proj_b", hidden * nv
        yield f"{a}.in_proj_a", hidden * nv
    yield f"{a}.conv1d", (2 * kd + vd) * (num(c, "linear_conv_kernel_dim") or 4)
    yield f"{a}.out_proj", vd * hidden


def _is_moe_layer(c: dict[str, Any], i: int) -> bool:
    if not num(c, "n_routed_experts", "num_experts", "num_local_experts"):
        return False
    only_dense = c.get("mlp_only_layers")
    if isinstance(only_dense, list) and i in only_dense:
        return False
    # Qwen MoE: decoder_sparse_step; Llama 4 Maverick: interleave_moe_layer_step (every 2nd layer is MoE)
    step = num(c, "decoder_sparse_step", "interleave_moe_layer_step") or 1
    return i >= num(c, "first_k_dense_replace") and (i + 1) % step == 0


def _mlp(c: dict[str, Any], at: str, i: int) -> Iterator[Part]:
    hidden = num(c, "hidden_size", "d_model")
    m = f"{at}.mlp"
    if not _is_moe_layer(c, i):
        # Llama 4's dense layers between MoE ones are wider than its experts: intermediate_size_mlp
        inter = num(c, "intermediate_size_mlp", "intermediate_size", "ffn_dim")
        for proj in ("gate_proj", "up_proj", "down_proj"):
            yield f"{m}.{proj}", hidden * inter
        return
    experts = num(c, "n_routed_experts", "num_experts", "num_local_experts")
    inter = num(c, "moe_intermediate_size", "intermediate_size")
    if c.get("enable_moe_block"):
        # Gemma 4 MoE: every layer keeps its dense MLP and adds experts and a router beside it, named
        # layers.N.experts and layers.N.router (the checkpoint's own names, which its quantizers exclude by)
        for proj in ("gate_proj", "up_proj", "down_proj"):
            yield f"{m}.{proj}", hidden * num(c, "intermediate_size")
        yield f"{at}.experts", experts * 3 * hidden * inter
        yield f"{at}.router", hidden * experts
        return
    yield f"{m}.experts", experts * 3 * hidden * inter
    # the router: gpt-oss names it mlp.router, the others mlp.gate
    yield (f"{m}.router" if str(c.get("model_type", "")) == "gpt_oss" else f"{m}.gate"), hidden * experts
    shared = num(c, "shared_expert_intermediate_size")
    if str(c.get("model_type", "")).startswith("llama4"):   # every Llama 4 MoE layer has one, no key says so
        shared = num(c, "intermediate_size")
    if shared:
        for proj in ("gate_proj", "up_proj", "down_proj"):
            yield f"{m}.shared_expert.{proj}", hidden * shared
    elif num(c, "n_shared_experts"):
        for proj in ("gate_proj", "up_proj", "down_proj"):
            yield f"{m}.shared_experts.{proj}", hidden * inter * num(c, "n_shared_experts")


def _mtp(c: dict[str, Any], layers: int) -> Iterator[Part]:
    """DeepSeek's MTP layers are extra decoder layers past the last; Qwen's live under mtp.*."""
    hidden = num(c, "hidden_size", "d_model")
    for k in range(num(c, "num_nextn_predict_layers")):
        at = f"layers.{layers + k}"
        yield f"{at}.eh_proj", 2 * hidden * hidden
        yield from _attention(c, at, "full")
        yield from _mlp(c, at, layers + k)
    for k in range(num(c, "mtp_num_hidden_layers")):
        yield "mtp.fc", 2 * hidden * hidden
        yield from _attention(c, f"mtp.layers.{k}", "full")
        yield from _mlp(c, f"mtp.layers.{k}", max(num(c, "first_k_dense_replace"), 0))


def _vision(v: dict[str, Any], text_hidden: int) -> Iterator[Part]:
    """A ViT tower (Qwen-VL shape): blocks, patch and position embeddings, patch mergers into the text width."""
    h, depth = num(v, "hidden_size", "embed_dim"), num(v, "depth", "num_hidden_layers")
    if not (h and depth):
        return
    inter = num(v, "intermediate_size") or 4 * h
    patch = num(v, "patch_size") or 14
    merge = num(v, "spatial_merge_size") or 1
    out = num(v, "out_hidden_size") or text_hidden
    block = 4 * h * h + 2 * h * inter
    embed = (num(v, "in_channels") or 3) * (num(v, "temporal_patch_size") or 1) * patch * patch * h \
        + num(v, "num_position_embeddings") * h
    wide = h * merge * merge
    mergers = 1 + len(v.get("deepstack_visual_indexes") or [])
    yield "visual", depth * block + embed + mergers * (wide * wide + wide * out)


def nemotron_h(c: dict[str, Any]) -> Iterator[Part]:
    """Nemotron-H: one block per character of hybrid_override_pattern: M Mamba-2 mixer, * attention,
    - an MLP (relu2: up and down, no gate), E a MoE of such experts with a shared one; with
    moe_latent_size the routed experts work in that smaller width between two projections."""
    hidden = num(c, "hidden_size")
    pattern = str(c["hybrid_override_pattern"])
    mtp = str(c.get("mtp_hybrid_override_pattern") or "") * num(c, "num_nextn_predict_layers")
    for i, kind in enumerate(pattern + mtp):
        at = f"layers.{i}.mixer" if i < len(pattern) else f"mtp.layers.{i - len(pattern)}.mixer"
        if kind == "M":
            inner = num(c, "mamba_num_heads") * num(c, "mamba_head_dim") or num(c, "expand") * hidden
            groups = num(c, "n_groups") * num(c, "ssm_state_size")
            yield f"{at}.in_proj", hidden * (2 * inner + 2 * groups + num(c, "mamba_num_heads"))
            yield f"{at}.conv1d", (inner + 2 * groups) * (num(c, "conv_kernel") or 4)
            yield f"{at}.out_proj", inner * hidden
        elif kind == "*":
            heads = num(c, "num_attention_heads")
            head_dim = num(c, "head_dim", "attention_head_dim") or hidden // heads
            kv = num(c, "num_key_value_heads") or heads
            yield f"{at}.q_proj", hidden * heads * head_dim
            yield f"{at}.k_proj", hidden * kv * head_dim
            yield f"{at}.v_proj", hidden * kv * head_dim
            yield f"{at}.o_proj", heads * head_dim * hidden
        elif kind == "-":
            yield f"{at}.up_proj", hidden * num(c, "intermediate_size")
            yield f"{at}.down_proj", hidden * num(c, "intermediate_size")
        elif kind == "E":
            experts, inter = num(c, "n_routed_experts"), num(c, "moe_intermediate_size")
            width = num(c, "moe_latent_size") or hidden
            if width != hidden:
                yield f"{at}.fc1_latent_proj", hidden * width
                yield f"{at}.fc2_latent_proj", width * hidden
            yield f"{at}.experts", experts * 2 * width * inter
            yield f"{at}.gate", hidden * experts
            shared = num(c, "moe_shared_expert_intermediate_size")
            yield f"{at}.shared_experts.up_proj", hidden * shared
            yield f"{at}.shared_experts.down_proj", hidden * shared


def decilm(c: dict[str, Any]) -> Iterator[Part]:
    """DeciLM / Llama-Nemotron (NAS): each block_configs entry sets its own attention (grouped-KV with
    n_heads_in_group, a single linear, or none) and its own FFN width (ffn_mult)."""
    hidden, heads = num(c, "hidden_size"), num(c, "num_attention_heads")
    head_dim = num(c, "head_dim") or hidden // heads
    for i, block in enumerate(c["block_configs"]):
        attn, ffn = block.get("attention") or {}, block.get("ffn") or {}
        a, m = f"layers.{i}.self_attn", f"layers.{i}.mlp"
        if attn.get("replace_with_linear"):
            yield f"{a}.linear_attn", hidden * hidden
        elif not attn.get("no_op"):
            kv = heads // (attn.get("n_heads_in_group") or 1)
            yield f"{a}.q_proj", hidden * heads * head_dim
            yield f"{a}.k_proj", hidden * kv * head_dim
            yield f"{a}.v_proj", hidden * kv * head_dim
            yield f"{a}.o_proj", heads * head_dim * hidden
        if ffn.get("replace_with_linear"):
            yield f"{m}.linear_mlp", hidden * hidden
        elif not ffn.get("no_op"):
            # DeciLM's ffn_mult_to_intermediate_size: 2/3 of mult x hidden, rounded up to 256
            inter = -(-int(2 * float(ffn.get("ffn_mult") or 0) * hidden / 3) // 256) * 256
            for proj in ("gate_proj", "up_proj", "down_proj"):
                yield f"{m}.{proj}", hidden * inter
