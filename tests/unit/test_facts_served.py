"""Which weight files the servers load (facts/served.py), on the layouts of real repos."""

from __future__ import annotations

import json

from gpunode.facts import served
from gpunode.facts.served import left_out
from tests.unit.test_facts_model import probe

# openai/gpt-oss-20b as downloaded whole (its file list in
# https://discuss.huggingface.co/t/what-are-all-the-files-that-are-being-downloaded/173329): the
# sharded safetensors the index names, plus metal/model.bin and original/model.safetensors.
GPT_OSS_20B = ["LICENSE", "README.md", "USAGE_POLICY", "chat_template.jinja", "config.json", "generation_config.json",
               "model-00000-of-00002.safetensors", "model-00001-of-00002.safetensors",
               "model-00002-of-00002.safetensors", "model.safetensors.index.json", "special_tokens_map.json",
               "tokenizer.json", "tokenizer_config.json", "metal/model.bin", "original/config.json",
               "original/dtypes.json", "original/model.safetensors"]
GPT_OSS_SHARDS = ["model-00000-of-00002.safetensors", "model-00001-of-00002.safetensors",
                  "model-00002-of-00002.safetensors"]


def test_a_whole_gpt_oss_download_leaves_out_its_metal_and_original_copies():
    assert left_out(GPT_OSS_20B, GPT_OSS_SHARDS) == ("metal/model.bin", "original/model.safetensors")


def test_a_consolidated_file_beside_indexed_shards_is_left_out():
    # Mistral-7B-v0.3: "both sharded safetensors files and a consolidated safetensors file"
    # (the comment over SGLang's filter_duplicate_safetensors_files)
    files = ["consolidated.safetensors", "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
             "model-00003-of-00003.safetensors", "model.safetensors.index.json", "params.json", "tokenizer.model.v3"]
    assert left_out(files, files[1:4]) == ("consolidated.safetensors",)
    # without the index, as SGLang does: model.safetensors wins over consolidated.safetensors
    assert left_out(["consolidated.safetensors", "model.safetensors", "config.json"], None) == (
        "consolidated.safetensors",)


def test_an_mtp_file_the_index_does_not_name_is_kept():
    # baseten-admin/glm-4.7-fp4 ships mtp.safetensors outside its index (SGLang PR 17166 adds it back)
    files = ["config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
             "model.safetensors.index.json", "mtp.safetensors"]
    assert left_out(files, files[1:3]) == ()


def test_a_layout_without_safetensors_at_the_top_leaves_out_nothing():
    assert left_out(["config.json", "pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"],
                    None) == ()


def test_the_model_size_counts_only_what_the_servers_load(tmp_path):
    folder = tmp_path / "gpt-oss-20b"
    for name in GPT_OSS_20B:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"x" * (1000 if name.endswith((".bin", ".safetensors")) else 10))
    (folder / "config.json").write_text(json.dumps({"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss"}))
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {f"w{i}": shard for i, shard in enumerate(GPT_OSS_SHARDS)}}))
    m = probe(folder)
    served = [p for p in folder.rglob("*") if p.is_file()
              and str(p.relative_to(folder)) not in ("metal/model.bin", "original/model.safetensors")]
    assert m.size_bytes == sum(p.stat().st_size for p in served)
    assert m.unserved == ("metal/model.bin", "original/model.safetensors")
    assert "leaving out 2 other copies of the weights" in m.size_source


def test_the_audit_sizes_a_local_folder_as_the_staging_copies_it(tmp_path):
    from gpunode.cli.audit import folder_bytes

    folder = tmp_path / "gpt-oss-20b"
    for name in GPT_OSS_20B:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"x" * (1000 if name.endswith((".bin", ".safetensors")) else 10))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": GPT_OSS_SHARDS[0]}}))
    index = (folder / "model.safetensors.index.json").stat().st_size
    # the one shard the index names, and every file that is not weights; not the two other shards
    # at the top nor metal/ and original/
    others = [n for n in GPT_OSS_20B
              if not n.endswith((".bin", ".safetensors")) and n != "model.safetensors.index.json"]
    assert folder_bytes(str(folder)) == 1000 + 10 * len(others) + index


def test_an_index_without_a_weight_map_object_counts_as_no_index(tmp_path):
    assert served.index_shards({"weight_map": {"a.weight": "b.safetensors", "c.weight": "a.safetensors",
                                               "d.weight": "a.safetensors"}}) == ("a.safetensors", "b.safetensors")
    assert served.index_shards({"weight_map": {}}) == ()
    for broken in ({"metadata": {}}, {"weight_map": ["x.safetensors"]}, ["weight_map"], None):
        assert served.index_shards(broken) is None
    # so a broken index leaves out only what a folder without one would
    files = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "original/model.safetensors"]
    assert served.left_out(files, served.index_shards({"metadata": {}})) == ("original/model.safetensors",)
    folder = tmp_path / "broken-index"
    for name in [*files, "config.json"]:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"x" * 100)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}}))
    assert probe(folder).unserved == ("original/model.safetensors",)  # not every weights file
