"""trust_remote_code on recorded real model configs (tests/data/models, each with its SOURCE): a model whose
config.json names its own Python code (auto_map) and that the pinned sglang cannot read without it (the
derived data, read from the wheel) is refused naming the model and the variable; with the variable set
the servers get --trust-remote-code; a model with auto_map that sglang reads by itself is planned
without it and the plan warns; a model without auto_map is untouched."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpunode.errors import GpunodeError, ResolveError
from gpunode.facts.types import Driver
from gpunode.resolve import explain, resolve
from gpunode.resolve.load import load
from tests.unit.resolve_facts import on
from tests.unit.test_resolve_model_fit import model

KB = load()
SGLANG = [p.id for p in KB.pinsets if p.engine == "sglang"]
NEMOTRON = "llama-3.3-nemotron-super-49b-v1"     # DeciLMForCausalLM, auto_map: AutoConfig, AutoModelForCausalLM


def facts(name: str, shape: str = "h200-x1"):
    # a driver every pin set accepts: the question is the model's code, not the driver floor
    return replace(on(shape, model=model(name)), driver=Driver("580.95.05", "13.0"))


@pytest.mark.parametrize("variables", [{}, *({"pinset": p} for p in SGLANG)], ids=["default", *SGLANG])
def test_a_model_sglang_cannot_read_without_its_code_is_refused_naming_it_and_the_variable(variables):
    with pytest.raises(ResolveError) as info:
        resolve(facts(NEMOTRON), variables)
    e = info.value
    assert e.target == "h200-x1"
    assert NEMOTRON in e.message and "auto_map: AutoConfig, AutoModelForCausalLM" in e.message
    assert "trust_remote_code is off" in e.message and e.hint.startswith("set trust_remote_code: true")
    assert "engine: vllm" not in e.hint      # vLLM reads the same config through the same transformers


def test_with_trust_remote_code_the_servers_run_the_models_code_and_the_plan_says_why():
    plan = resolve(facts(NEMOTRON), {"trust_remote_code": True})
    assert all("--trust-remote-code" in s.argv for s in plan.servers)
    d = plan.decision("remote code")
    assert d.value == "trusted (--trust-remote-code)" and "auto_map: AutoConfig" in d.reason
    assert "remote code: trusted" in explain(plan)


def test_a_custom_code_model_sglang_reads_itself_is_planned_without_it_and_warned():
    """Kimi-K2.5 (KimiK25ForConditionalGeneration, auto_map): every pinned sglang reads its reference config
    by itself (derived), so no flag; the warning names the model and the variable."""
    plan = resolve(facts("kimi-k2.5", "b200-x8"), {"pinset": "cu13-latest"})
    assert "--trust-remote-code" not in plan.servers[0].argv
    said = [w for w in plan.warnings if "kimi-k2.5" in w and "ships Python code" in w]
    assert said and "trust_remote_code: true" in said[0] and "derived from the wheel" in said[0]
    assert plan.decision("remote code").value == "not run (no flag)"


def test_a_model_without_custom_code_is_untouched():
    plan = resolve(facts("qwen3-32b-fp8"))
    assert "--trust-remote-code" not in plan.servers[0].argv
    assert not [d for d in plan.decisions if d.decision == "remote code"]
    assert not [w for w in plan.warnings if "trust_remote_code" in w]


def test_a_value_that_is_not_a_bool_is_refused_naming_the_variable():
    with pytest.raises(GpunodeError) as info:
        resolve(facts(NEMOTRON), {"trust_remote_code": "sure"})
    assert "trust_remote_code" in info.value.message


def test_a_custom_code_config_of_another_model_type_is_its_own_reference():
    """Kimi-K2-Instruct is a DeepseekV3ForCausalLM like DeepSeek-R1, but of model type kimi_k2 with its own code:
    `inv kb.refresh` judges it apart, so the derived data answers for its model type."""
    from gpunode.judge import derive
    from tests.unit.resolve_facts import DATA

    keys = {r.key: r.folder.name for r in derive.references(DATA / "models")}
    assert keys["DeepseekV3ForCausalLM"] == "deepseek-r1"
    assert keys["DeepseekV3ForCausalLM/kimi_k2"] == "kimi-k2-instruct"
    assert not any("/" in k for k in keys if not k.startswith("DeepseekV3ForCausalLM"))   # one per type otherwise


# what each pinned sglang says of Kimi-K2's config without its code (derived: sglang 0.5.10.post1 refuses it)
KIMI_REFUSED = {p: KB.pinset(p).version == "0.5.10.post1" for p in SGLANG}


@pytest.mark.parametrize("pinset", SGLANG)
def test_kimi_k2_is_refused_where_its_sglang_cannot_read_it_and_planned_where_it_can(pinset):
    """The model type's own derived entry decides, not the architecture's reference (DeepSeek-R1, which every
    pinned sglang reads)."""
    said = KB.sglang_pick(pinset, "DeepseekV3ForCausalLM", "10.0", "kimi_k2")
    assert said is not None and ("rejected" in said) == KIMI_REFUSED[pinset]
    assert "rejected" not in KB.sglang_pick(pinset, "DeepseekV3ForCausalLM", "10.0")
    if KIMI_REFUSED[pinset]:
        with pytest.raises(ResolveError) as info:
            resolve(facts("kimi-k2-instruct", "b200-x8"), {"pinset": pinset})
        assert "kimi-k2-instruct" in info.value.message and "trust_remote_code is off" in info.value.message
        plan = resolve(facts("kimi-k2-instruct", "b200-x8"), {"pinset": pinset, "trust_remote_code": True})
        assert "--trust-remote-code" in plan.servers[0].argv
    else:
        plan = resolve(facts("kimi-k2-instruct", "b200-x8"), {"pinset": pinset})
        assert "--trust-remote-code" not in plan.servers[0].argv
        assert any("kimi-k2-instruct" in w and "trust_remote_code: true" in w for w in plan.warnings)


def test_on_the_recorded_b200_driver_kimi_k2_is_refused_offering_the_driver_or_trust_remote_code():
    """Driver 575.57.08 (recorded): only the 0.5.10.post1 pin sets run, and they need Kimi-K2's code; the
    newer ones would read it by themselves but need driver 580. The hint offers both ways."""
    with pytest.raises(ResolveError) as info:
        resolve(on("b200-x8", model=model("kimi-k2-instruct")))
    assert "driver 575.57.08 < 580" in info.value.message
    assert "upgrade the host's NVIDIA driver" in info.value.hint
    assert "or set trust_remote_code: true (cu12-legacy" in info.value.hint
    plan = resolve(on("b200-x8", model=model("kimi-k2-instruct")), {"trust_remote_code": True})
    assert plan.pinset.startswith("cu12-legacy") and "--trust-remote-code" in plan.servers[0].argv
