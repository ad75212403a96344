"""A model directory: architecture, attention layout, dtype and quantization,
size, shard completeness and whether MTP (multi-token prediction) weights are
really there.

The probe cats config.json, model.safetensors.index.json and hf_quant_config.json
back raw and lists file sizes; for a single-file model it reads the safetensors
header (8-byte little-endian length, then JSON) so that weight names are known
without the index. For a sharded one it reads the first shard's header, its name
on the line before: the tensors' dtypes are the only place some FP8 repositories
say FP8 (no quantization_config, no hf_quant_config.json).
"""

from __future__ import annotations

import json
import re
from typing import Any

from gpunode.facts import model_parts, model_size, served
from gpunode.facts.cache import Group
from gpunode.facts.probe import Snippet
from gpunode.facts.types import Model

_HAS_MODEL = '[ -n "$GN_MODEL" ]'

# The JSON files and the single-file header are reused while those files are the same; the
# listing (sizes: a copy may be under way) is read on every run.
MODEL = Group("model", tuple(f'"$GN_MODEL"/{f}' for f in (
    "config.json", "model.safetensors.index.json", "hf_quant_config.json", "*.safetensors")),
    fresh="model=$GN_MODEL")

SNIPPETS = (
    Snippet("model_files", r"""
[ -d "$GN_MODEL" ] || { echo "no such directory: $GN_MODEL"; exit 2; }
cd "$GN_MODEL" || exit 2
# GNU find prints the sizes itself; busybox find has no -printf (its repeated lines are harmless)
find -L . -maxdepth 3 -type f -printf '%s %p\n' 2>/dev/null && exit 0
if stat -L -c %s . >/dev/null 2>&1; then find -L . -maxdepth 3 -type f -exec stat -L -c '%s %n' {} +
else find -L . -maxdepth 3 -type f -exec wc -c {} +; fi""", when=_HAS_MODEL),
    Snippet("model_config", 'cat "$GN_MODEL/config.json"', when=_HAS_MODEL, cached=MODEL),
    Snippet("model_index", 'cat "$GN_MODEL/model.safetensors.index.json"', when=_HAS_MODEL, cached=MODEL),
    Snippet("model_quant", 'cat "$GN_MODEL/hf_quant_config.json"', when=_HAS_MODEL, cached=MODEL),
    # od -tu8 reads the host's byte order; every GPU host we serve is little-endian.
    Snippet("model_header", r"""
f="$GN_MODEL/model.safetensors"
if [ -e "$GN_MODEL/model.safetensors.index.json" ] || [ ! -f "$f" ]; then
  set -- "$GN_MODEL"/*.safetensors; f=$1
  [ -f "$f" ] || exit 0
  printf '%s\n' "${f##*/}"
fi
n=$(od -An -tu8 -N8 "$f"); n=${n##* }
case $n in ''|*[!0-9]*) echo "unreadable header length: $n"; exit 3;; esac
[ "$n" -le 104857600 ] || { echo "header too large: $n bytes"; exit 3; }
head -c $((8 + n)) "$f" | tail -c "$n" """,
            when=_HAS_MODEL, cached=MODEL),
)

# Layer type names vary by family ("linear_attention" in Qwen3.5/3.6 and
# Qwen3-Next, "agnes_delta_attention" elsewhere); these word parts mark the
# recurrent kind that needs a mamba-style state cache.
_LINEAR_MARKS = ("linear", "delta", "mamba", "ssm", "recurrent")


def is_linear_layer(layer_type: str) -> bool:
    return any(mark in layer_type.lower() for mark in _LINEAR_MARKS)


def parse_files(text: str) -> dict[str, int]:
    """{relative path: size} from `stat -c '%s %n'` or `wc -c` lines."""
    out = {}
    for line in text.splitlines():
        m = re.fullmatch(r"\s*(\d+)\s+(.+?)\s*", line)
        if m and m.group(2) != "total":
            out[m.group(2).removeprefix("./")] = int(m.group(1))
    return out


def _json(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _get(config: dict[str, Any], key: str) -> Any:
    """A key of the language model: text_config first (multimodal wrappers), then the top."""
    text = config.get("text_config")
    if isinstance(text, dict) and key in text:
        return text[key]
    return config.get(key)


def quantization(config: dict[str, Any], hf_quant: dict[str, Any] | None) -> str | None:
    """'fp8', 'nvfp4', 'awq', ... or None for an unquantized checkpoint.

    NVIDIA ModelOpt checkpoints name NVFP4 in several ways: quant_algo NVFP4 (in
    quantization_config or hf_quant_config.json), quant_method modelopt / modelopt_fp4,
    or quant_algo MIXED_PRECISION with NVFP4 layers listed per layer; all are nvfp4
    here, so that the NVFP4 rules (no NVFP4 on 8.9/9.0, the MoE runner) apply.
    """
    found = _quantization(config, hf_quant)[0]
    if found in ("modelopt", "modelopt_fp4", "mixed_precision"):
        text = json.dumps([hf_quant, _get(config, "quantization_config")]).lower()
        if "nvfp4" in text or "modelopt_fp4" in text:
            return "nvfp4"
        if "fp8" in text:
            return "fp8"
    return found


def _quantization(config: dict[str, Any], hf_quant: dict[str, Any] | None) -> tuple[str | None, str]:
    """(the quantization as named, the file and key that named it)."""
    if hf_quant:
        algo = (hf_quant.get("quantization") or {}).get("quant_algo")
        if algo:
            return str(algo).lower(), "hf_quant_config.json quant_algo"
    q = _get(config, "quantization_config")
    if not isinstance(q, dict):
        return None, ""
    where = "config.json quantization_config"
    if q.get("quant_algo"):
        return str(q["quant_algo"]).lower(), where + " quant_algo"
    method = str(q.get("quant_method", "")).lower() or None
    if method == "compressed-tensors":
        fmt = json.dumps(q).lower()
        if "nvfp4" in fmt:
            return "nvfp4", where
        if "float-quantized" in fmt:
            return "fp8", where
    return method, where


def quantization_source(config: dict[str, Any], hf_quant: dict[str, Any] | None, header: dict[str, Any] | None,
                        header_file: str) -> tuple[str | None, str]:
    """quantization() and where it was read; a checkpoint neither config names is FP8 when its
    safetensors header holds float8 tensors."""
    found, where = quantization(config, hf_quant), _quantization(config, hf_quant)[1]
    if found or not header:
        return found, where if found else ""
    kinds = sorted({str(v.get("dtype")) for v in header.values() if isinstance(v, dict)
                    and str(v.get("dtype", "")).startswith("F8_")})
    if kinds:
        return "fp8", f"safetensors header of {header_file} ({', '.join(kinds)} tensors)"
    return None, ""


def config_problem(text: str | None, name: str, need_arch: bool = True) -> str:
    """What is wrong with config.json or the index, or "" when it can be used."""
    if text is None:  # not there at all: the model may not be staged yet; the resolver warns about that
        return ""
    if not text.strip():
        return f"{name} is empty"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"{name} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    if not isinstance(value, dict):
        return f"{name} holds a JSON {type(value).__name__}, not an object"
    if need_arch and not (value.get("architectures") or value.get("model_type")):
        return f"{name} names no architectures and no model_type"
    if not need_arch and not isinstance(value.get("weight_map"), dict):
        return f"{name} has no weight_map object"
    return ""


def mtp_config(config: dict[str, Any]) -> bool:
    """Qwen3.5/3.6/Next: mtp_num_hidden_layers; DeepSeek V3 style: num_nextn_predict_layers."""
    return any(isinstance(_get(config, k), int) and _get(config, k) >= 1
               for k in ("mtp_num_hidden_layers", "num_nextn_predict_layers"))


def mtp_weights(names: list[str], files: dict[str, int], config: dict[str, Any]) -> bool:
    """Weights named mtp.* (SGLang's Qwen MTP loader keeps those), an mtp.safetensors
    file, or DeepSeek-style extra layers past num_hidden_layers."""
    if any(path.rsplit("/", 1)[-1].startswith("mtp") and path.endswith(".safetensors") for path in files):
        return True
    if any(n.startswith("mtp.") or ".mtp." in n for n in names):
        return True
    layers = _get(config, "num_hidden_layers")
    if isinstance(layers, int) and _get(config, "num_nextn_predict_layers"):
        return any(n.startswith(f"model.layers.{layers}.") for n in names)
    return False


def parse_model(path: str, files_text: str | None, config_text: str | None, index_text: str | None,
                quant_text: str | None, header_text: str | None) -> Model:
    if files_text is None:
        return Model(path=path, exists=False)
    files = parse_files(files_text)
    problem = config_problem(config_text, "config.json") or (
        config_problem(index_text, "model.safetensors.index.json", need_arch=False) if index_text is not None else "")
    config = _json(config_text) or {}
    index = _json(index_text)
    header_file = "model.safetensors"
    if header_text and not header_text.lstrip().startswith("{"):   # a shard's header, its name first
        header_file, _, header_text = header_text.partition("\n")
    header = _json(header_text)
    whole = header if header_file == "model.safetensors" else None   # one shard's names are not the model's
    names: list[str] = []
    shards: tuple[str, ...]
    missing: tuple[str, ...] = ()
    if index is not None:
        weight_map = index.get("weight_map") or {}
        names = list(weight_map)
        shards = served.index_shards(index) or ()
        missing = tuple(s for s in shards if s not in files)
    else:
        shards = tuple(sorted(p for p in files if p.endswith(".safetensors") and "/" not in p))
        if whole is not None:
            names = [k for k in whole if k != "__metadata__"]
    layer_types = _get(config, "layer_types")
    layer_types = tuple(str(t) for t in layer_types) if isinstance(layer_types, list) else ()
    text_config = config.get("text_config")
    arch = config.get("architectures")
    hf_quant = _json(quant_text)
    quant, quant_source = quantization_source(config, hf_quant, header, header_file)
    dtype = str(_get(config, "dtype") or _get(config, "torch_dtype") or "")
    on_disk = sum(n for p, n in files.items() if p.endswith(served.WEIGHTS))
    unserved = served.left_out(files, served.index_shards(index))
    if on_disk:
        size, size_source = sum(n for p, n in files.items() if p not in unserved), "files on disk"
        if unserved:
            size_source += f" (leaving out {len(unserved)} other copies of the weights: {', '.join(unserved[:3])}"
            size_source += " ...)" if len(unserved) > 3 else ")"
    else:  # only a config (and maybe the index): the weights are not there to measure
        size, size_source = model_size.estimate(config, index, quant, dtype, hf_quant)
    return Model(
        path=path,
        exists=True,
        architectures=tuple(arch) if isinstance(arch, list) else (),
        model_type=str(config.get("model_type", "")),
        text_model_type=str(text_config.get("model_type", "")) if isinstance(text_config, dict) else "",
        hybrid_linear_attention=any(is_linear_layer(t) for t in layer_types),
        layer_types=layer_types,
        dtype=dtype,
        quantization=quant,
        quantization_source=quant_source,
        moe_experts=model_parts.num(model_parts.text_config(config), "n_routed_experts", "num_experts",
                                    "num_local_experts"),
        size_bytes=size,
        size_source=size_source,
        config_problem=problem,
        shards=shards,
        missing_shards=missing,
        unserved=unserved,
        mtp_config=mtp_config(config),
        mtp_weights=mtp_weights(names, files, config),
        num_parameters=_num_parameters(index, whole),
        max_position_embeddings=_get(config, "max_position_embeddings"),
    )


def _num_parameters(index: dict[str, Any] | None, header: dict[str, Any] | None) -> int | None:
    if index is not None:
        total = (index.get("metadata") or {}).get("total_parameters")
        return int(total) if isinstance(total, int | str) and str(total).isdigit() else None
    if header is not None:
        count = 0
        for name, info in header.items():
            if name == "__metadata__" or not isinstance(info, dict):
                continue
            n = 1
            for dim in info.get("shape", []):
                n *= int(dim)
            count += n
        return count
    return None
