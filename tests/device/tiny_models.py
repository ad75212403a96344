"""Tiny random-weight models made on the device machine, no download (serve_proof.py).

One tokenizer (byte-level BPE trained on the Python standard library's own sources) and these
models in safetensors, written where gpunode's facts will read them:
- tiny-qwen3: Qwen3ForCausalLM, dense;
- tiny-qwen36: Qwen3_5ForConditionalGeneration, the Qwen3.6 hybrid (gated delta net + full
  attention every 4th layer), with a one-block vision tower;
- tiny-qwen36-text: Qwen3_5ForCausalLM, the same text model without the vision tower;
- tiny-qwen36-mtp: tiny-qwen36 with one MTP layer (mtp_num_hidden_layers 1 and mtp.* tensors named as
  the Qwen3.5/3.6 checkpoints name them, which sglang's qwen3_5_mtp.py loads);
- tiny-qwen36-moe: Qwen3_5MoeForConditionalGeneration, the hybrid MoE (Qwen3.6-35B-A3B's keys, shrunk);
- tiny-dsv3: DeepseekV3ForCausalLM, MLA + MoE with DeepSeek-V3's/R1's head shapes (kv_lora_rank 512,
  rope 64, nope 128), noaux_tc grouped routing and a dense first layer; tensors named as the published
  checkpoints name them (written here, not by transformers, whose v5 fuses the experts);
- tiny-gpt-oss: GptOssForCausalLM in bf16 (gpt-oss-20b's keys, no MXFP4 quantization_config).
config.json is written from the keys real Qwen3.6 configs carry (tests/data/models/qwen3.6-27b-nvfp4),
shrunk, and not by save_pretrained, which dropped text_config.full_attention_interval (transformers 5.12.1).
Run with the machine's own Python (torch, transformers, tokenizers): `python3 tiny_models.py ROOT`.
"""

from __future__ import annotations

import json
import sys
import sysconfig
from pathlib import Path

VOCAB = 8192
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
           "<|image_pad|>", "<|video_pad|>"]
CHAT = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def tokenizer(out: Path) -> dict[str, int]:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    files = sorted(str(p) for p in Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:200]
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - len(SPECIAL), special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train(files, trainer)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    ids = {t: tok.token_to_id(t) for t in SPECIAL}
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "bos_token": None, "model_max_length": 32768, "chat_template": CHAT}, indent=1))
    return ids


def copy_tokenizer(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (dst / name).write_text((src / name).read_text())


def text_config(ids: dict[str, int], model_type: str) -> dict:
    layers = 8
    return {"attention_bias": False, "attention_dropout": 0.0, "attn_output_gate": True,
            "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"], "dtype": "bfloat16",
            "full_attention_interval": 4, "head_dim": 64, "hidden_act": "silu", "hidden_size": 256,
            "initializer_range": 0.02, "intermediate_size": 512,
            "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)],
            "linear_conv_kernel_dim": 4, "linear_key_head_dim": 32, "linear_num_key_heads": 4,
            "linear_num_value_heads": 8, "linear_value_head_dim": 32, "mamba_ssm_dtype": "float32",
            "max_position_embeddings": 32768, "model_type": model_type, "mtp_num_hidden_layers": 0,
            "num_attention_heads": 4, "num_hidden_layers": layers, "num_key_value_heads": 2,
            "pad_token_id": None, "partial_rotary_factor": 0.25, "rms_norm_eps": 1e-06,
            "rope_parameters": {"mrope_interleaved": True, "mrope_section": [11, 11, 10],
                                "partial_rotary_factor": 0.25, "rope_theta": 10000000, "rope_type": "default"},
            "tie_word_embeddings": False, "use_cache": True, "vocab_size": VOCAB}


def save(model, out: Path, config: dict) -> None:
    import torch

    model = model.to(torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    (out / "config.json").write_text(json.dumps(config, indent=1))  # ours, not save_pretrained's


def dense(root: Path, ids: dict[str, int]) -> None:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    out = root / "tiny-qwen3"
    cfg = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "attention_bias": False,
           "attention_dropout": 0.0, "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"],
           "head_dim": 64, "hidden_act": "silu", "hidden_size": 256, "initializer_range": 0.02,
           "intermediate_size": 512, "max_position_embeddings": 32768, "max_window_layers": 4,
           "num_attention_heads": 4, "num_hidden_layers": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
           "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": False, "dtype": "bfloat16",
           "use_cache": True, "use_sliding_window": False, "vocab_size": VOCAB}
    torch.manual_seed(0)
    save(Qwen3ForCausalLM(Qwen3Config(**cfg)), out, cfg)


def hybrid(root: Path, ids: dict[str, int]) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    text = text_config(ids, "qwen3_5_text")
    vision = {"deepstack_visual_indexes": [], "depth": 1, "dtype": "bfloat16", "hidden_act": "gelu_pytorch_tanh",
              "hidden_size": 64, "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 128,
              "model_type": "qwen3_5_vision", "num_heads": 2, "num_position_embeddings": 2304,
              "out_hidden_size": 256, "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2}
    cfg = {"architectures": ["Qwen3_5ForConditionalGeneration"], "dtype": "bfloat16",
           "image_token_id": ids["<|image_pad|>"], "language_model_only": False, "model_type": "qwen3_5",
           "text_config": text, "tie_word_embeddings": False, "video_token_id": ids["<|video_pad|>"],
           "vision_config": vision, "vision_end_token_id": ids["<|vision_end|>"],
           "vision_start_token_id": ids["<|vision_start|>"]}
    torch.manual_seed(0)
    out = root / "tiny-qwen36"
    save(AutoModelForImageTextToText.from_config(AutoConfig.for_model(**cfg)), out, cfg)
    (out / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "Qwen2VLImageProcessorFast", "processor_class": "Qwen3VLProcessor",
        "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
        "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
        "size": {"longest_edge": 16777216, "shortest_edge": 65536}}, indent=1))
    (out / "video_preprocessor_config.json").write_text(json.dumps({
        "video_processor_type": "Qwen3VLVideoProcessor", "processor_class": "Qwen3VLProcessor",
        "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
        "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
        "size": {"longest_edge": 25165824, "shortest_edge": 4096}}, indent=1))
    out_text = root / "tiny-qwen36-text"
    tcfg = {**text_config(ids, "qwen3_5_text"), "architectures": ["Qwen3_5ForCausalLM"]}
    torch.manual_seed(0)
    save(AutoModelForCausalLM.from_config(AutoConfig.for_model(**tcfg)), out_text, tcfg)


def randomize(model) -> None:
    """Every matrix drawn N(0, 0.02): from_config leaves some 3-D expert tensors as torch.empty."""
    import torch

    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
            elif not torch.isfinite(p).all():
                p.zero_()


def hybrid_mtp(root: Path) -> None:
    """tiny-qwen36 plus one MTP layer: a full-attention decoder layer, fc and three norms under mtp.*"""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    src, out = root / "tiny-qwen36", root / "tiny-qwen36-mtp"
    shutil.copytree(src, out, dirs_exist_ok=True)
    cfg = json.loads((out / "config.json").read_text())
    cfg["text_config"]["mtp_num_hidden_layers"] = 1
    cfg["text_config"]["mtp_use_dedicated_embeddings"] = False
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    weights = load_file(str(out / "model.safetensors"))
    hidden = cfg["text_config"]["hidden_size"]
    full = next(i for i, t in enumerate(cfg["text_config"]["layer_types"]) if t == "full_attention")
    prefix = f"model.language_model.layers.{full}."
    torch.manual_seed(1)
    extra = {"mtp." + "layers.0." + k[len(prefix):]: v.clone() for k, v in weights.items() if k.startswith(prefix)}
    norm = weights["model.language_model.norm.weight"]
    extra.update({"mtp.fc.weight": (torch.randn(hidden, 2 * hidden) * 0.02).to(torch.bfloat16),
                  "mtp.pre_fc_norm_embedding.weight": norm.clone(), "mtp.pre_fc_norm_hidden.weight": norm.clone(),
                  "mtp.norm.weight": norm.clone()})
    save_file({**weights, **extra}, str(out / "model.safetensors"), metadata={"format": "pt"})


def hybrid_moe(root: Path, ids: dict[str, int]) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    text = {**text_config(ids, "qwen3_5_moe_text"), "num_experts": 8, "num_experts_per_tok": 2,
            "moe_intermediate_size": 128, "shared_expert_intermediate_size": 128, "router_aux_loss_coef": 0.001,
            "output_router_logits": False}
    text.pop("intermediate_size")
    src = json.loads((root / "tiny-qwen36" / "config.json").read_text())
    vision = {**src["vision_config"], "model_type": "qwen3_5_moe_vision"}
    cfg = {**src, "architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
           "text_config": text, "vision_config": vision}
    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_config(AutoConfig.for_model(**cfg))
    randomize(model)
    out = root / "tiny-qwen36-moe"
    save(model, out, cfg)
    for name in ("preprocessor_config.json", "video_preprocessor_config.json"):
        (out / name).write_text((root / "tiny-qwen36" / name).read_text())


def deepseek_v3(root: Path, ids: dict[str, int]) -> None:
    import torch
    from safetensors.torch import save_file

    h, heads, nope, rope, v, kv_lora, q_lora, inter, moe_inter, experts = 512, 4, 128, 64, 128, 512, 256, 1024, 256, 16
    layers, dense_layers = 3, 1
    cfg = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "attention_bias": False,
           "attention_dropout": 0.0, "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"],
           "ep_size": 1, "first_k_dense_replace": dense_layers, "hidden_act": "silu", "hidden_size": h,
           "initializer_range": 0.02, "intermediate_size": inter, "kv_lora_rank": kv_lora,
           "max_position_embeddings": 163840, "moe_intermediate_size": moe_inter, "moe_layer_freq": 1,
           "n_group": 4, "n_routed_experts": experts, "n_shared_experts": 1, "norm_topk_prob": True,
           "num_attention_heads": heads, "num_experts_per_tok": 4, "num_hidden_layers": layers,
           "num_key_value_heads": heads, "num_nextn_predict_layers": 0, "q_lora_rank": q_lora,
           "qk_nope_head_dim": nope, "qk_rope_head_dim": rope, "rms_norm_eps": 1e-06,
           "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                            "original_max_position_embeddings": 4096, "type": "yarn"},
           "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "tie_word_embeddings": False,
           "topk_group": 2, "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "use_cache": True,
           "v_head_dim": v, "vocab_size": VOCAB}
    torch.manual_seed(0)

    def mat(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape) * 0.02).to(torch.bfloat16)

    def ones(n: int) -> torch.Tensor:
        return torch.ones(n, dtype=torch.bfloat16)

    w = {"model.embed_tokens.weight": mat(VOCAB, h), "model.norm.weight": ones(h), "lm_head.weight": mat(VOCAB, h)}
    for i in range(layers):
        p = f"model.layers.{i}."
        w.update({p + "input_layernorm.weight": ones(h), p + "post_attention_layernorm.weight": ones(h),
                  p + "self_attn.q_a_proj.weight": mat(q_lora, h), p + "self_attn.q_a_layernorm.weight": ones(q_lora),
                  p + "self_attn.q_b_proj.weight": mat(heads * (nope + rope), q_lora),
                  p + "self_attn.kv_a_proj_with_mqa.weight": mat(kv_lora + rope, h),
                  p + "self_attn.kv_a_layernorm.weight": ones(kv_lora),
                  p + "self_attn.kv_b_proj.weight": mat(heads * (nope + v), kv_lora),
                  p + "self_attn.o_proj.weight": mat(h, heads * v)})
        if i < dense_layers:
            w.update({p + "mlp.gate_proj.weight": mat(inter, h), p + "mlp.up_proj.weight": mat(inter, h),
                      p + "mlp.down_proj.weight": mat(h, inter)})
            continue
        w.update({p + "mlp.gate.weight": mat(experts, h),
                  p + "mlp.gate.e_score_correction_bias": torch.zeros(experts, dtype=torch.float32),
                  p + "mlp.shared_experts.gate_proj.weight": mat(moe_inter, h),
                  p + "mlp.shared_experts.up_proj.weight": mat(moe_inter, h),
                  p + "mlp.shared_experts.down_proj.weight": mat(h, moe_inter)})
        for e in range(experts):
            q = f"{p}mlp.experts.{e}."
            w.update({q + "gate_proj.weight": mat(moe_inter, h), q + "up_proj.weight": mat(moe_inter, h),
                      q + "down_proj.weight": mat(h, moe_inter)})
    out = root / "tiny-dsv3"
    out.mkdir(parents=True, exist_ok=True)
    save_file(w, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(cfg, indent=1))


def gpt_oss(root: Path, ids: dict[str, int]) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    layers = 4
    cfg = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "attention_bias": True,
           "attention_dropout": 0.0, "eos_token_id": ids["<|im_end|>"], "pad_token_id": ids["<|endoftext|>"],
           "experts_per_token": 2, "num_experts_per_tok": 2, "num_local_experts": 8, "head_dim": 64,
           "hidden_act": "silu", "hidden_size": 256, "initial_context_length": 4096, "initializer_range": 0.02,
           "intermediate_size": 256,
           "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)],
           "max_position_embeddings": 131072, "num_attention_heads": 4, "num_hidden_layers": layers,
           "num_key_value_heads": 2, "output_router_logits": False, "rms_norm_eps": 1e-05,
           "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                            "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": False},
           "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
           "tie_word_embeddings": False, "use_cache": True, "vocab_size": VOCAB, "dtype": "bfloat16"}
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**cfg))
    randomize(model)
    save(model, root / "tiny-gpt-oss", cfg)


def main() -> int:
    root = Path(sys.argv[1])
    ids = tokenizer(root / "tiny-qwen3")
    for name in ("tiny-qwen36", "tiny-qwen36-text", "tiny-qwen36-moe", "tiny-dsv3", "tiny-gpt-oss"):
        copy_tokenizer(root / "tiny-qwen3", root / name)
    dense(root, ids)
    hybrid(root, ids)
    failed = []
    for make in (lambda: hybrid_mtp(root), lambda: hybrid_moe(root, ids), lambda: deepseek_v3(root, ids),
                 lambda: gpt_oss(root, ids)):
        try:  # one model's trouble must not cost the others (one device call makes them all)
            make()
        except Exception as e:
            import traceback
            traceback.print_exc()
            failed.append(repr(e))
    for d in sorted(root.iterdir()):
        print(d.name, sorted(p.name for p in d.iterdir()))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
