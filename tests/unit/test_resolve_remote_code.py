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
