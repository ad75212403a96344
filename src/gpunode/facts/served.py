"""Which files of a model folder the servers load, and which are other copies of the weights.

A full download of a Hugging Face repo often holds the weights more than once: openai/gpt-oss-20b
has its sharded safetensors at the top (~13.8 GB) plus metal/model.bin and original/model.safetensors
(13.8 GB each, https://discuss.huggingface.co/t/what-are-all-the-files-that-are-being-downloaded/173329);
Meta's Llama repos keep original/consolidated.00.pth; Mistral's keep consolidated.safetensors beside
the shards. Counted or staged, those copies triple what the model needs.

The rule follows SGLang's loader (srt/model_loader/weight_utils.py): it globs the top folder only;
with model.safetensors.index.json it keeps just the files the index's weight_map names
(filter_duplicate_safetensors_files), adding an mtp.safetensors the index forgot for GLM-4 MoE
(maybe_add_mtp_safetensors, sgl-project/sglang PRs 17166 and 21134); without an index it drops
consolidated.safetensors when model.safetensors is there too. Here a top-level mtp*.safetensors is
always kept (a few hundred MB at most, and the Qwen3.6 cookbook ships one), and every file that
is not weights (configs, tokenizers, remote code) is kept wherever it is.
"""

from __future__ import annotations

from collections.abc import Iterable

WEIGHTS = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def left_out(paths: Iterable[str], index_shards: Iterable[str] | None) -> tuple[str, ...]:
    """The weight files the servers do not load, sorted; () where the layout is not one we know
    (no safetensors at the top: a .bin or .pt model loads them all).

    paths: relative to the model folder. index_shards: the files the index's weight_map names, or
    None without an index."""
    files = sorted(set(paths))
    weights = [p for p in files if p.endswith(WEIGHTS)]
    top = [p for p in weights if "/" not in p and p.endswith(".safetensors")]
    if index_shards is not None:
        keep = set(index_shards) | {p for p in top if p.startswith("mtp")}
    elif top:
        keep = set(top)
        if "model.safetensors" in keep:
            keep.discard("consolidated.safetensors")
    else:
        return ()
    return tuple(p for p in weights if p not in keep)


def index_shards(index: object) -> tuple[str, ...] | None:
    """The files that a parsed model.safetensors.index.json names in its weight_map, sorted; None
    where it has no weight_map object (then the rule above treats the folder as having no index)."""
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    return tuple(sorted({str(v) for v in weight_map.values()})) if isinstance(weight_map, dict) else None
