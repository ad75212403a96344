"""The fit and FP8 decisions on recorded real configs (tests/data/models, each with its SOURCE) and
recorded GPU shapes (tests/data/nvidia-smi): how many GPUs a model needs follows its real size, a
model of unknown size is not planned on a guess, and FP8 MoE checkpoints are refused where SGLang
has no e4m3 math (sm_80/sm_86) while dense FP8 ones run weight-only."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gpunode.errors import ResolveError
from gpunode.facts.model import parse_model
from gpunode.facts.types import Driver, Model
from gpunode.resolve import resolve
from tests.unit.resolve_facts import DATA, on

MODELS = DATA / "models"


def model(name: str, **change: object):
    folder = MODELS / name
    config = {**json.loads((folder / "config.json").read_text()), **change}
    text = json.dumps(config)
    quant = folder / "hf_quant_config.json"
    return parse_model(f"/models/{name}", f"{len(text)} ./config.json", text, None,
                       quant.read_text() if quant.exists() else None, None)


def outcome(name: str, shape: str, **change: object):
    try:
        return resolve(on(shape, model=model(name, **change)))
    except ResolveError as exc:
        return exc


@pytest.mark.parametrize(("name", "shape", "tp"), [
    # 63 GB (Nemotron-H hybrid MoE, counted as 205 GB before): two H100 (weights and a KV reserve), one H200
    ("nemotron-3-nano-30b-a3b-bf16", "h100-x8", 2),
    ("nemotron-3-nano-30b-a3b-bf16", "h200-x1", 1),
    # INT4 experts, 594 GB: eight B200 (2 TB when read as BF16, which fits nowhere)
    ("kimi-k2.5", "b200-x8", 8),
    ("mixtral-8x7b-v0.1", "h100-x8", 2),
    ("qwen3-30b-a3b-fp8", "h100-x8", 1),
    ("minimax-m2.5", "b200-x8", 2),
    ("llama-4-scout-17b-16e-instruct", "h100-x8", 4),
])
def test_the_plan_uses_as_many_gpus_as_the_real_size_needs(name, shape, tp):
    plan = outcome(name, shape)
    assert not isinstance(plan, ResolveError), plan.message
    assert plan.topology.tp == tp, plan.decision("topology")


@pytest.mark.parametrize(("shape", "tp"), [("h100-x8", 2), ("h200-x1", 1)])
def test_a_custom_code_model_is_sized_right_and_refused_by_sglang_itself(shape, tp):
    """99.7 GB of BF16 (DeciLM block_configs; counted as 47 GB before): two H100s or one H200. Every
    pinned sglang refuses the repository's custom code without --trust-remote-code (derived data), so
    the plan asks for trust_remote_code; with it, the size decides the topology."""
    refused = outcome("llama-3.3-nemotron-super-49b-v1", shape)
    assert isinstance(refused, ResolveError) and "trust_remote_code is off" in refused.message
    facts = replace(on(shape, model=model("llama-3.3-nemotron-super-49b-v1")), driver=Driver("580.95.05", "13.0"))
    plan = resolve(facts, {"trust_remote_code": True})
    assert plan.topology.tp == tp, plan.decision("topology")


@pytest.mark.parametrize(("name", "shape"), [
    ("qwen3-coder-480b-a35b-instruct", "h100-x8"),     # 960 GB of BF16
    ("deepseek-v3.2", "h100-x8"),                      # 685 GB of FP8 on 640 GB
    ("mixtral-8x7b-v0.1", "l4-x1"),                    # 93 GB on one 24 GB card
    ("kimi-k2.5", "h100-x8"),
])
def test_a_model_bigger_than_the_box_is_refused(name, shape):
    result = outcome(name, shape)
    assert isinstance(result, ResolveError), result.topology
    assert "does not fit" in result.message, result.message


def test_a_model_of_a_family_the_estimate_does_not_know_is_not_planned_on_a_guess():
    # a model type the pinned sglang's transformers configures (persimmon) but the estimate does not know
    result = outcome("meta-llama-3.1-70b", "h100-x8", model_type="persimmon")
    assert isinstance(result, ResolveError)
    assert "unknown size" in result.message and "persimmon" in result.message
    assert "tp:" in result.hint and "index" in result.hint


@pytest.mark.parametrize("model_facts", [None, Model(path="/mnt/models/Kimi-K2-Instruct", exists=False)],
                         ids=["no-model-folder", "folder-not-there-yet"])
def test_a_model_of_unknown_size_is_refused_naming_the_target_and_what_to_set(model_facts):
    """No plan assumes a fit (issue 28): with no size known, one server per 24 GB L4 could be a 1 TB model."""
    result = outcome_of(on("l4-x1", model=model_facts))
    assert isinstance(result, ResolveError), result.topology
    assert result.target == "l4-x1" and "size is unknown" in result.message
    assert "tp:" in result.hint and "model_source" in result.hint
    if model_facts is not None:
        assert "/mnt/models/Kimi-K2-Instruct does not exist yet" in result.message


def test_tp_given_by_the_inventory_is_the_users_decision_when_the_size_is_unknown():
    plan = resolve(on("h100-x8", model=None), {"tp": 2, "model_path": "/mnt/models/m"})
    assert plan.topology.tp == 2 and len(plan.servers) == 4
    why = plan.decision("topology").reason
    assert "tp: 2 set by the inventory" in why and "was not checked" in why
    assert not any("assumes" in w for w in plan.warnings)


def outcome_of(facts):
    try:
        return resolve(facts, {"model_path": "/mnt/models/m"})
    except ResolveError as exc:
        return exc


@pytest.mark.parametrize("name", ["qwen3-30b-a3b-fp8", "minimax-m2.5"])
@pytest.mark.parametrize("shape", ["a10-x1", "a100-sxm4-e-process"])
def test_fp8_moe_checkpoints_are_refused_before_sm89_with_the_source(name, shape):
    result = outcome(name, shape)
    assert isinstance(result, ResolveError), result.topology
    assert "fp8e4nv" in result.message and "MoE" in result.message
    assert "issues/12887" in result.evidence and "8.9" in result.hint


def test_dense_fp8_runs_weight_only_on_sm86_and_the_plan_says_so():
    plan = outcome("qwen3-32b-fp8", "a100-sxm4-e-process")
    assert not isinstance(plan, ResolveError), plan.message
    d = plan.decision("fp8 weights")
    assert d.value == "weight-only (Marlin W8A16)" and "can_auto_enable_marlin_fp8" in d.source


def test_fp8_moe_runs_natively_from_sm89():
    plan = outcome("qwen3-30b-a3b-fp8", "h100-x8")
    assert not isinstance(plan, ResolveError)
    assert plan.decision("fp8 weights") is None


def test_the_cli_refuses_an_fp8_moe_named_only_by_its_shards_on_an_a10(tmp_path):
    """gpunode resolve --model on a folder whose only FP8 mark is the shards' dtype (F8_E4M3): the
    real A10 nvidia-smi (sm_86) and the real Qwen3-30B-A3B-FP8 config without its quantization_config."""
    from tests.unit.test_facts_model import safetensors
    from tests.unit.test_resolve_cli import gpunode

    config = json.loads((MODELS / "qwen3-30b-a3b-fp8" / "config.json").read_text())
    config.pop("quantization_config")
    (tmp_path / "config.json").write_text(json.dumps(config))
    weight_map = {"model.layers.0.mlp.experts.0.up_proj.weight": "model-00001-of-00001.safetensors"}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    safetensors(tmp_path / "model-00001-of-00001.safetensors", {"model.layers.0.mlp.experts.0.up_proj.weight": [8, 8]},
                dtype="F8_E4M3")
    out = gpunode("resolve", "--nvidia-smi", str(DATA / "nvidia-smi" / "a10-x1" / "nvidia-smi.txt"),
                  "--model", str(tmp_path))
    assert out.returncode == 2, out.stdout
    assert "fp8 MoE experts" in out.stderr and "fp8e4nv" in out.stderr, out.stderr


def _a100_with(tmp_path, name: str):
    """The real 8x A100-SXM4-80GB sglang.check_env report (tests/data/gpu-reports) and a real model folder."""
    from gpunode.cli.resolve import offline_facts

    folder = tmp_path / name
    folder.mkdir()
    for f in ("config.json", "hf_quant_config.json"):
        if (MODELS / name / f).exists():
            (folder / f).write_text((MODELS / name / f).read_text())
    return offline_facts(str(DATA / "gpu-reports" / "check_env-a100-x8.txt"), str(folder))


def test_a_modelopt_fp8_checkpoint_is_refused_before_sm89_whatever_the_pin_set(tmp_path):
    """SGLang reads an FP8 checkpoint named only by hf_quant_config.json as modelopt_fp8, whose minimum
    capability is 89 in every pinned wheel (its loader refuses 8.0 before any Marlin fallback could run)."""
    facts = _a100_with(tmp_path, "llama-3.1-70b-instruct-fp8")
    for variables in ({"pinset": "cu12-legacy"}, {}):
        with pytest.raises(ResolveError) as err:
            resolve(facts, variables)
        assert "ModelOpt FP8" in err.value.message and "Minimum capability: 89" in err.value.message
        assert "hf_quant_config.json" in err.value.message and "get_min_capability" in err.value.evidence
        assert "quant_method fp8" in err.value.hint


def test_an_fp8_checkpoint_sglang_reads_with_fp8_py_runs_weight_only_on_every_pin_set(tmp_path):
    facts = _a100_with(tmp_path, "qwen3-32b-fp8")
    plan = resolve(facts, {"pinset": "cu12-legacy"})
    assert plan.decision("fp8 weights").value == "weight-only (Marlin W8A16)"
    assert plan.decision("quantization").reason == "named by config.json quantization_config"
