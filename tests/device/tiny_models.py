"""Tiny random-weight models made on the device machine, no download (serve_proof.py).

One tokenizer (byte-level BPE trained on the Python standard library's own sources) and three
models in safetensors, written where gpunode's facts will read them:
- tiny-qwen3: Qwen3ForCausalLM, dense;
- tiny-qwen36: Qwen3_5ForConditionalGeneration, the Qwen3.6 hybrid (gated delta net + full
  attention every 4th layer), with a one-block vision tower;
- tiny-qwen36-text: Qwen3_5ForCausalLM, the same text model without the vision tower.
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


def main() -> int:
    root = Path(sys.argv[1])
    ids = tokenizer(root / "tiny-qwen3")
    for name in ("tiny-qwen36", "tiny-qwen36-text"):
        copy_tokenizer(root / "tiny-qwen3", root / name)
    dense(root, ids)
    hybrid(root, ids)
    for d in sorted(root.iterdir()):
        print(d.name, sorted(p.name for p in d.iterdir()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
