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

from gpunode.errors import FactError, preview
from gpunode.facts import model_parts, model_size, served
from gpunode.facts.cache import Group
from gpunode.facts.snippet import Snippet
from gpunode.facts.types import Model

_HAS_MODEL = '[ -n "$GN_MODEL" ]'

# The JSON files and the single-file header are reused while those files are the same; the
# listing (sizes: a copy may be under way) is read on every run.
MODEL = Group("model", tuple(f'"$GN_MODEL"/{f}' for f in (
    "config.json", "model.safetensors.index.json", "hf_quant_config.json", "*.safetensors")),
    fresh="model=$GN_MODEL")

# The JSON files come back whole, so only a regular file of at most this size is read: a FIFO
# named config.json would hang the probe (and the lock), a 1 GB one fill the controller's memory.
JSON_CAP = 16 << 20
REFUSED = 3  # the exit code of a JSON file not read (not a regular file, or too large)


def _read(name: str) -> str:
    return (f'f="$GN_MODEL/{name}"; [ -e "$f" ] || exit 1; [ -f "$f" ] || {{ echo "{name} is not a regular file"; '
            f'exit 3; }}; n=$(wc -c < "$f"); [ "$n" -le {JSON_CAP} ] || {{ echo "{name} is $n bytes"; exit 3; }}; '
            f'head -c {JSON_CAP} "$f"')


SNIPPETS = (
    Snippet("model_files", r"""
[ -d "$GN_MODEL" ] || { echo "no such directory: $GN_MODEL"; exit 2; }
cd "$GN_MODEL" || exit 2
# GNU find prints the sizes itself, and "? TYPE PATH" for what is neither a file nor a folder (a FIFO,
# a link to nothing); busybox find has no -printf (its repeated lines are harmless)
find -L . -maxdepth 3 \( -type f -printf '%s %p\n' \) -o \( ! -type d -printf '? %y %p\n' \) 2>/dev/null && exit 0
if stat -L -c %s . >/dev/null 2>&1; then find -L . -maxdepth 3 -type f -exec stat -L -c '%s %n' {} +
else find -L . -maxdepth 3 -type f -exec wc -c {} +; fi""", when=_HAS_MODEL),
    Snippet("model_config", _read("config.json"), when=_HAS_MODEL, cached=MODEL),
    Snippet("model_index", _read("model.safetensors.index.json"), when=_HAS_MODEL, cached=MODEL),
    Snippet("model_quant", _read("hf_quant_config.json"), when=_HAS_MODEL, cached=MODEL),
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


_FILE_LINE = re.compile(r"\s*(\d+)\s+(.+?)\s*")
_ODD_LINE = re.compile(r"\? ([a-zA-Z?]) (.+)")
_KINDS = {"p": "a named pipe (FIFO)", "l": "a symbolic link to a missing file (or a loop of links)",
          "c": "a character device", "b": "a block device", "s": "a socket"}


def parse_files(text: str) -> dict[str, int]:
    """{relative path: size} from `stat -c '%s %n'` or `wc -c` lines."""
    out = {}
    for line in text.splitlines():
        m = _FILE_LINE.fullmatch(line)
        if m and m.group(2) != "total":
            out[m.group(2).removeprefix("./")] = int(m.group(1))
    return out


def _parse(text: str) -> Any:
    """json.loads: NaN and Infinity are read, as transformers writes them (Nemotron-H's
    time_step_limit holds Infinity); where a size is expected, shape_problem refuses them by key.
    Raises ValueError for bad JSON and for a number of thousands of digits, RecursionError for deep nesting."""
    return json.loads(text)


def parse_odd(text: str) -> dict[str, str]:
    """{relative path: what it is} of the listing's entries that are neither a file nor a folder."""
    out = {}
    for line in text.splitlines():
        m = _ODD_LINE.fullmatch(line)
        if m:
            out[m.group(2).removeprefix("./")] = _KINDS.get(m.group(1), "not a regular file")
    return out


def odd_weights_problem(files: dict[str, int], odd: dict[str, str], index_shards: tuple[str, ...] | None) -> str:
    """A weights file the servers would load that is a FIFO, a device or a dangling link (issue 41: a
    model whose only weights file was a FIFO got a plan, its size estimated from config.json), or ""."""
    unserved = served.left_out([*files, *odd], index_shards)
    bad = sorted(p for p in odd if p.endswith(served.WEIGHTS) and p not in unserved)
    if not bad:
        return ""
    more = f" (and {len(bad) - 1} more such)" if len(bad) > 1 else ""
    return (f"the weights file {bad[0]} is {odd[bad[0]]}, not a regular file{more}: the servers cannot load it; "
            "put the file itself there (download it again)")


def _json(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        value = _parse(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


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
        algo = _dict(hf_quant.get("quantization")).get("quant_algo")
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


def quantization_form(config: dict[str, Any], hf_quant: dict[str, Any] | None) -> str:
    """The quantization as the checkpoint names it ("mixed_precision", "fp8", "compressed-tensors"), and
    ", hf_quant_config.json only" when config.json has no quantization_config: sglang reads the two
    forms by different code (0.5.23's Nemotron-H overrides read config.json's quantization_config for a
    MIXED_PRECISION checkpoint), so `inv kb.refresh` judges a reference of each form apart. "" when unquantized."""
    named, where = _quantization(config, hf_quant)
    if not named:
        return ""
    alone = where.startswith("hf_quant_config.json") and not isinstance(_get(config, "quantization_config"), dict)
    return f"{named}, hf_quant_config.json only" if alone else named


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
        value = _parse(text)
    except json.JSONDecodeError as exc:
        return f"{name} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    except ValueError as exc:  # an integer of more digits than Python converts
        return f"{name} is not usable JSON: {str(exc)[:100]}"
    except RecursionError:
        return f"{name} is nested too deeply to read"
    if not isinstance(value, dict):
        return f"{name} holds a JSON {type(value).__name__}, not an object"
    if need_arch and not (value.get("architectures") or value.get("model_type")):
        return f"{name} names no architectures and no model_type"
    if not need_arch and not isinstance(value.get("weight_map"), dict):
        return f"{name} has no weight_map object"
    return ""


def _json_problem(text: str | None, name: str) -> str:
    """What keeps an optional JSON file from being read as an object, or ""."""
    if not text or not text.strip():
        return ""
    problem = config_problem(text, name, need_arch=False)
    return "" if problem.endswith("has no weight_map object") else problem


# Keys of config.json that size the model; each is a positive whole number far below these bounds in
# any real model (vocabularies reach ~10^6, layers ~10^2). Past them the estimate would loop for
# minutes or overflow, so the file is refused by key instead.
_SIZES = {"num_hidden_layers": 4096, "hidden_size": 1 << 24, "vocab_size": 1 << 24, "intermediate_size": 1 << 24,
          "num_attention_heads": 1 << 16, "num_key_value_heads": 1 << 16, "head_dim": 1 << 16,
          "num_experts": 1 << 16, "num_local_experts": 1 << 16, "n_routed_experts": 1 << 16,
          "moe_intermediate_size": 1 << 24, "max_position_embeddings": 1 << 31}


def shape_problem(config: dict[str, Any], index: dict[str, Any] | None, hf_quant: dict[str, Any] | None,
                  header: dict[str, Any] | None, header_file: str = "model.safetensors") -> str:
    """The first value of the model's JSON files whose type or range no reader expects, named by
    file and key with what was expected, or ""."""
    for where in (config, config.get("text_config")):
        for key, high in _SIZES.items():
            v = where.get(key) if isinstance(where, dict) else None
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= high:
                shown = preview(v, 40)
                return f"config.json: {key} {shown} is out of range; expected a whole number from 1 to {high}"
    if hf_quant is not None and "quantization" in hf_quant and not isinstance(hf_quant["quantization"], dict):
        return (f"hf_quant_config.json: quantization is a {type(hf_quant['quantization']).__name__}; "
                "expected an object such as {\"quant_algo\": \"FP8\"}")
    if index is not None:
        meta = index.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            return f"model.safetensors.index.json: metadata is a {type(meta).__name__}; expected an object"
        total = (meta or {}).get("total_size")
        if total is not None and (isinstance(total, bool) or not isinstance(total, int) or not 0 <= total < 1 << 62):
            return "model.safetensors.index.json: metadata.total_size is not a size; expected a whole number of bytes"
        bad = next((k for k, v in (index.get("weight_map") or {}).items() if not isinstance(v, str)), None)
        if bad is not None:
            return f"model.safetensors.index.json: weight_map[{str(bad)[:60]!r}] is not a string; expected a file name"
    for name, info in (header or {}).items():
        if name == "__metadata__" or not isinstance(info, dict):
            continue
        shape = info.get("shape", [])
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 1 << 40
                                                  for d in shape):
            return (f"{header_file}: header: tensor {str(name)[:60]!r}: shape is {repr(shape)[:40]}; "
                    "expected a list of whole numbers")
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
    """The model facts; a value of a shape no reader expects (a list where an object belongs, a
    string for a number) is a FactError naming the model's files, never a crash."""
    try:
        return _parse_model(path, files_text, config_text, index_text, quant_text, header_text)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError, RecursionError) as exc:
        read = [n for n, t in (("config.json", config_text), ("model.safetensors.index.json", index_text),
                               ("hf_quant_config.json", quant_text), ("the model.safetensors header", header_text))
                if t is not None]
        raise FactError(f"{path}: {', '.join(read) or 'the file list'}: a value has a shape gpunode cannot read "
                        f"({type(exc).__name__})",
                        hint="compare the files with the model's published ones; re-download the ones that "
                        "differ") from None


def _parse_model(path: str, files_text: str | None, config_text: str | None, index_text: str | None,
                 quant_text: str | None, header_text: str | None) -> Model:
    if files_text is None:
        return Model(path=path, exists=False)
    files = parse_files(files_text)
    broken = next((line for line in files_text.splitlines() if line.strip() and not _FILE_LINE.fullmatch(line)
                   and not _ODD_LINE.fullmatch(line) and not re.match(r"(find|stat|wc): ", line)), None)
    problem = (f"a file's name in the model folder holds a line break (a listing line reads {broken[:80]!r}); "
               "rename it: staging copies files by name, one per line") if broken is not None else ""
    problem = problem or config_problem(config_text, "config.json") or (
        config_problem(index_text, "model.safetensors.index.json", need_arch=False) if index_text is not None else "")
    config = _json(config_text) or {}
    index = _json(index_text)
    problem = problem or odd_weights_problem(files, parse_odd(files_text), served.index_shards(index))
    header_file = "model.safetensors"
    if header_text and header_text.partition("\n")[0].endswith(".safetensors"):   # a shard's header, its name first
        header_file, _, header_text = header_text.partition("\n")
    problem = problem or _json_problem(quant_text, "hf_quant_config.json") or \
        _json_problem(header_text, f"{header_file}: header") or \
        shape_problem(config, index, _json(quant_text), _json(header_text), header_file)
    header = _json(header_text)
    whole = header if header_file == "model.safetensors" else None   # one shard's names are not the model's
    names: list[str] = []
    shards: tuple[str, ...]
    missing: tuple[str, ...] = ()
    if index is not None:
        weight_map = _dict(index.get("weight_map"))
        names = [str(n) for n in weight_map]
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
        quantization_form=quantization_form(config, hf_quant),
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
        custom_code=tuple(str(k) for k in config["auto_map"]) if isinstance(config.get("auto_map"), dict) else (),
    )


def _num_parameters(index: dict[str, Any] | None, header: dict[str, Any] | None) -> int | None:
    if index is not None:
        total = _dict(index.get("metadata")).get("total_parameters")
        if isinstance(total, bool) or not isinstance(total, int | str):
            return None
        text = str(total) if isinstance(total, str) or total.bit_length() < 64 else ""
        return int(text) if text.isascii() and text.isdigit() and len(text) <= 20 else None
    if header is not None:
        count = 0
        for name, info in header.items():
            if name == "__metadata__" or not isinstance(info, dict):
                continue
            shape = info.get("shape", [])
            if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                      for d in shape):
                return None  # not a tensor's shape: no count rather than a wrong one
            n = 1
            for dim in shape:
                n *= dim
            count += n
        return count
    return None
