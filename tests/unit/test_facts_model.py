"""Model directories: the real probe (sh on this machine) reads folders laid out like
Hugging Face checkpoints, and the recorded tiny model of the build machine."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from gpunode.facts.parse import parse
from gpunode.facts.probe import gather
from gpunode.facts.snapshot import load
from gpunode.transport.local import LocalTransport

DATA = Path(__file__).resolve().parents[1] / "data"

# The Qwen3.6-27B layout as the reference notes give it (docs/sources.md#model-support, #mtp-weights):
# 64 layers, every 4th full attention, one MTP layer declared under text_config.
QWEN36 = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5",
    "text_config": {
        "model_type": "qwen3_5_text",
        "num_hidden_layers": 64,
        "layer_types": [("full_attention" if i % 4 == 3 else "linear_attention") for i in range(64)],
        "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False,
        "max_position_embeddings": 262144,
        "dtype": "bfloat16",
    },
}


def safetensors(path: Path, tensors: dict[str, list[int]], dtype: str = "BF16") -> None:
    """A valid safetensors file: 8-byte little-endian header length, JSON header, zeroed data of dtype."""
    header, offset = {}, 0
    for name, shape in tensors.items():
        size = 1 if dtype.startswith("F8") else 2
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + bytes(offset))


def sharded(folder: Path, config: dict, shards: dict[str, dict[str, list[int]]], *, write: set[str] | None = None,
            extra: dict[str, str] | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    weight_map = {name: shard for shard, tensors in shards.items() for name in tensors}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    for shard, tensors in shards.items():
        if write is None or shard in write:
            safetensors(folder / shard, tensors)
    for name, text in (extra or {}).items():
        (folder / name).write_text(text)
    return folder


def probe(folder: Path):
    return parse(gather(LocalTransport("here"), model_path=str(folder))).model


SHARDS = {
    "model-00001-of-00002.safetensors": {"model.language_model.embed_tokens.weight": [64, 8]},
    "model-00002-of-00002.safetensors": {"model.language_model.layers.0.mlp.up_proj.weight": [8, 8]},
}


def test_qwen36_layout_without_mtp_weights(tmp_path):
    m = probe(sharded(tmp_path / "Qwen3.6-27B", QWEN36, SHARDS))
    assert m.exists and m.architectures == ("Qwen3_5ForConditionalGeneration",)
    assert (m.model_type, m.text_model_type, m.dtype) == ("qwen3_5", "qwen3_5_text", "bfloat16")
    assert m.hybrid_linear_attention and m.layer_types.count("full_attention") == 16
    assert m.max_position_embeddings == 262144
    assert m.shards == tuple(SHARDS) and m.missing_shards == ()
    # The config declares an MTP layer, but the checkpoint has no MTP weights: no MTP.
    assert m.mtp_config and not m.mtp_weights
    files = sorted((tmp_path / "Qwen3.6-27B").iterdir())
    assert m.size_bytes == sum(f.stat().st_size for f in files)


def test_mtp_weights_named_in_the_index(tmp_path):
    shards = {**SHARDS, "model-00002-of-00002.safetensors": {"mtp.fc.weight": [8, 16]}}
    assert probe(sharded(tmp_path / "m", QWEN36, shards)).mtp_weights


def test_mtp_weights_in_their_own_file(tmp_path):
    folder = sharded(tmp_path / "m", QWEN36, SHARDS)
    safetensors(folder / "mtp.safetensors", {"mtp.norm.weight": [8]})
    assert probe(folder).mtp_weights


def test_missing_shards_are_named(tmp_path):
    m = probe(sharded(tmp_path / "m", QWEN36, SHARDS, write={"model-00001-of-00002.safetensors"}))
    assert m.missing_shards == ("model-00002-of-00002.safetensors",)


@pytest.mark.parametrize("config_quant, hf_quant, expected", [
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, None, "fp8"),
    (None, {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16}}, "nvfp4"),
    ({"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized"}, None, "nvfp4"),
    (None, None, None),
])
def test_quantization(tmp_path, config_quant, hf_quant, expected):
    config = json.loads(json.dumps(QWEN36))
    if config_quant:
        config["quantization_config"] = config_quant
    extra = {"hf_quant_config.json": json.dumps(hf_quant)} if hf_quant else None
    assert probe(sharded(tmp_path / "m", config, SHARDS, extra=extra)).quantization == expected


def test_single_file_model_reads_names_from_the_safetensors_header(tmp_path):
    folder = tmp_path / "single"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
        "num_hidden_layers": 2, "num_nextn_predict_layers": 1, "torch_dtype": "bfloat16"}))
    # DeepSeek keeps its MTP layer as the layer after the last one.
    safetensors(folder / "model.safetensors", {"model.layers.0.w": [4, 4], "model.layers.2.w": [3, 5]})
    m = probe(folder)
    assert m.shards == ("model.safetensors",)
    assert m.num_parameters == 16 + 15
    assert m.mtp_config and m.mtp_weights and m.dtype == "bfloat16"


def test_a_path_that_does_not_exist(tmp_path):
    m = probe(tmp_path / "nope")
    assert m is not None and not m.exists


def test_recorded_tiny_model_of_the_build_machine():
    snap = DATA / "snapshots" / "debian12-cpu"
    m = parse(load(snap)).model
    config = json.loads((snap / "model_config.txt").read_text())
    assert m.architectures == tuple(config["architectures"]) == ("Qwen3ForCausalLM",)
    assert m.layer_types == tuple(config["layer_types"]) and not m.hybrid_linear_attention
    assert m.shards == ("model.safetensors",) and m.quantization is None
    # gpunode_lab.tinymodel documents 1.7 M parameters in bfloat16 (3.4 MB)
    assert m.num_parameters == 1705472
    sizes = dict(reversed(line.split(" ", 1)) for line in (snap / "model_files.txt").read_text().splitlines())
    assert int(sizes["./model.safetensors"]) == pytest.approx(2 * m.num_parameters, rel=0.01)
    assert not m.mtp_config and not m.mtp_weights


def test_an_fp8_checkpoint_named_nowhere_but_in_its_shards_dtypes_is_fp8_and_says_where(tmp_path):
    """Some FP8 repositories carry neither quantization_config nor hf_quant_config.json: the first
    shard's safetensors header (F8_E4M3 tensors) is then the only place that says FP8, and the FP8
    rules (no e4m3 MoE before sm_89) must still apply."""
    folder = sharded(tmp_path / "m", {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe"}, SHARDS,
                     write=set())
    for shard, tensors in SHARDS.items():
        safetensors(folder / shard, tensors, dtype="F8_E4M3")
    m = probe(folder)
    assert m.quantization == "fp8"
    assert m.quantization_source == "safetensors header of model-00001-of-00002.safetensors (F8_E4M3 tensors)"
    assert m.num_parameters is None   # one shard's header does not count the whole model


def test_the_quantization_says_which_file_named_it(tmp_path):
    hf = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}}
    m = probe(sharded(tmp_path / "m", QWEN36, SHARDS, extra={"hf_quant_config.json": json.dumps(hf)}))
    assert m.quantization == "fp8" and m.quantization_source == "hf_quant_config.json quant_algo"
    plain = probe(sharded(tmp_path / "p", QWEN36, SHARDS))
    assert plain.quantization is None and plain.quantization_source == ""


def test_the_quantization_form_says_how_and_where_the_checkpoint_names_it():
    """The derived data judges each form apart (judge/derive.py): sglang 0.5.23's Nemotron-H overrides read
    config.json's quantization_config for a MIXED_PRECISION checkpoint, so one named in hf_quant_config.json
    only is another form than one config.json names (tests/data/models, each with its SOURCE)."""
    from gpunode.facts.model import parse_model

    models = Path(__file__).resolve().parents[1] / "data" / "models"

    def form(name: str) -> str:
        folder = models / name
        quant = folder / "hf_quant_config.json"
        return parse_model(str(folder), "", (folder / "config.json").read_text(), None,
                           quant.read_text() if quant.exists() else None, None).quantization_form

    assert form("nemotron-3.5-lightning-30b-a3b-nvfp4") == "mixed_precision, hf_quant_config.json only"
    assert form("qwen3.6-35b-a3b-nvfp4") == "mixed_precision"        # config.json names it too
    assert form("nemotron-3-super-120b-a12b-fp8") == "fp8, hf_quant_config.json only"
    assert form("nemotron-3-nano-30b-a3b-bf16") == ""
