"""The knowledge base: every rule names its source, bad data is reported with
file, line and key, and its tables agree with each other and with the facts
parsers."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from gpunode.facts import gpu as gpu_facts
from gpunode.resolve import versions
from gpunode.resolve.hardware import cc_of
from gpunode.resolve.kb import KB
from gpunode.resolve.load import COMPAT, load
from gpunode.resolve.yamlread import KnowledgeBaseError
from tests.unit.resolve_facts import DATA, smi

# a URL, a section of docs/sources.md, a file, or a quoted observation from a journal/log
CITATION = re.compile(r"https?://\S+|§\s*\d|\b[\w-]+\.(md|yml|py)\b|Resolver table|Architecture rows"
                      r"|journal|CCCL_VERSION")


def all_sources(kb: KB) -> list[tuple[str, str]]:
    out = [(f"indexes.{i.id}", i.source) for i in kb.indexes.values()]
    out += [(f"nvcc_packages.{n.cuda}", n.source) for n in kb.nvcc.values()]
    out += [(f"routers.{r.id}", r.source) for r in kb.routers.values()]
    out += [(f"pinsets.{p.id}", p.source) for p in kb.pinsets]
    for a in kb.archs:
        out.append((f"archs.{a.cc}", a.source))
        out += [(f"archs.{a.cc}.hybrid_gdn[{h.engine}]", h.source) for h in a.hybrid_gdn]
        if a.tp_env or a.tp_args:
            out.append((f"archs.{a.cc}.tp", a.tp_source))
    out.append(("gpus.topology", kb.topology_source))
    out += [(f"entrypoints.{e.engine}", e.source) for e in kb.entrypoints.values()]
    for o in kb.options.values():
        out.append((f"options.{o.name}", o.source))
        out += [(f"options.{o.name}.{e}[{r.engine}]", r.source) for e, rows in o.rows.items() for r in rows
                if r.engine]
    out += [(f"env.{k}.{e}[{r.engine}]", r.source) for k, by in kb.env_rows.items() for e, rows in by.items()
            for r in rows]
    out.append(("gpu_env", kb.gpu_env_source))
    for f in kb.families:
        out.append((f"families.{f.id}", f.source))
        out += [(f"families.{f.id}.variants.{v.id}", v.source) for v in f.variants]
        out += [(f"families.{f.id}.mtp.{e}", m.source) for e, m in f.mtp.items()]
        out += [(f"families.{f.id}.extra_args", x.source) for x in f.extra_args]
    out += [(f"fixes.{x.id}", x.source) for x in kb.fixes]
    return out


def test_every_rule_names_a_source_that_cites_something():
    sources = all_sources(load())
    assert len(sources) > 60
    for name, source in sources:
        assert source and CITATION.search(source), f"{name}: source {source!r} cites no URL, section or file"
        # a YAML comment (" #") inside an unquoted value cuts it short; unbalanced brackets give it away
        assert source.count("(") == source.count(")"), f"{name}: source looks truncated: {source!r}"


def test_every_sglang_pinset_has_every_versioned_flag():
    kb = load()
    for p in kb.pinsets:
        for o in kb.options.values():
            rows = o.rows.get(p.engine, ())
            if rows:
                assert any(versions.matches(p.version, r.engine) for r in rows), (p.id, o.name)


def test_pinset_driver_floors_follow_nvidias_compatibility_table():
    """driver_native: docs/sources.md#driver-floor (cu130 => 580, cu129 => 575, cu128 => 570); driver_min: minor version
    compatibility (CUDA 12.x >= 525, 13.x >= 580, docs.nvidia.com/deploy/cuda-compatibility)."""
    native = {"13.0": "580", "12.9": "575", "12.8": "570"}
    compat = {13: "580", 12: "525"}
    for p in load().pinsets:
        if p.torch_cuda:
            assert p.driver_native == native[p.torch_cuda], p.id
            assert p.driver_min == compat[p.cuda_major], p.id


def test_gpu_name_patterns_agree_with_the_facts_compute_capability_table():
    """gpus.yml's product patterns and gpunode/facts/data's table must give the same CC
    for every GPU in the recorded nvidia-smi outputs."""
    kb = load()
    shapes = [p.name for p in (DATA / "nvidia-smi").iterdir() if p.is_dir()]
    checked = 0
    for shape in shapes:
        for g in smi(shape)[0]:
            ours, _ = cc_of(type(g)(g.index, g.name, g.memory_mib, None), kb)
            theirs, _ = gpu_facts.compute_cap_from_name(g.name)
            if ours and theirs:
                assert ours == theirs, (shape, g.name)
                checked += 1
    assert checked >= 20


# -- bad data is reported with file, line and key -----------------------------------------------


@pytest.fixture
def kb_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "compat"
    shutil.copytree(COMPAT, folder)
    return folder


def edit(folder: Path, name: str, old: str, new: str) -> None:
    path = folder / name
    text = path.read_text()
    assert old in text, f"{old!r} not in {name}"
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize("name, old, new, words", [
    ("pinsets.yml", "    source: docs/sources.md#sglang-pins row 0.5.17, docs/sources.md#pin-sets (cu13-b)\n", "\n",
     "pinsets.pinsets[1].source: every rule must name its source"),
    ("pinsets.yml", "    glibc_min: \"2.34\"\n", "    glibc: \"2.34\"\n", "pinsets.pinsets[0].glibc: unknown key"),
    ("pinsets.yml", "index: pytorch-cu129", "index: pytorch-cu999", "'pytorch-cu999' is not defined under `indexes`"),
    ("pinsets.yml", "driver_min: \"580\"", "driver_min: \"five-eighty\"", "not a version: 'five-eighty'"),
    ("gpus.yml", '{engine: ">=0.5.23", allowed', '{engine: "=>0.5.23", allowed', "not a version specifier"),
    ("gpus.yml", "    attention: &blackwell_ws_attention\n      default: flashinfer",
     "    attention: &blackwell_ws_attention\n      default: fa3", "default backend fa3 is not in allowed"),
    ("fixes.yml", "when: {gpu: true}", "when: {gpus: true}", "fixes.fixes[3].when.gpus: unknown condition key"),
    ("fixes.yml", "{kind: ldconfig}", "{kind: reboot}", "unknown action"),
    ("flags.yml", '      - engine: ">=0.5.20"\n        flag: --mamba-radix-cache-strategy',
     '      - engine: ">=0.5.20,<0.5.23"\n        flag: --mamba-radix-cache-strategy',
     "option mamba_strategy has no row for sglang 0.5.23 (pin set cu13-latest)"),
    ("models.yml", "hybrid_gdn: true\n    multimodal: true", "hybrid_gdn: yes-ish\n    multimodal: true",
     "expected bool"),
])
def test_bad_knowledge_base_data_names_file_line_and_key(kb_copy, name, old, new, words):
    edit(kb_copy, name, old, new)
    with pytest.raises(KnowledgeBaseError) as info:
        load(kb_copy)
    text = str(info.value)
    assert words in text
    assert re.search(rf"{re.escape(str(kb_copy))}/[a-z]+\.yml(:\d+)?", text), text
    assert "hint:" in text


def test_yaml_syntax_error_is_a_knowledge_base_error(kb_copy):
    (kb_copy / "models.yml").write_text("families:\n  - id: [unclosed\n")
    with pytest.raises(KnowledgeBaseError) as info:
        load(kb_copy)
    assert "models.yml" in str(info.value)
