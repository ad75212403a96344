"""Issue 38, items 2, 3 and 5's floors: what each pin set's sglang wheel serves (compat/derived/sglang-registry.yml,
read from the released wheels by gpunode/wheelregistry.py) decides which pin set may run a model, and what
gpunode does not know is left to SGLang. The configs are the recorded real ones of tests/data/models (each
folder's SOURCE); the GPUs the recorded nvidia-smi reports of tests/data/nvidia-smi."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpunode.errors import ResolveError
from gpunode.facts.types import Driver
from gpunode.resolve import registry, resolve
from gpunode.resolve.load import load
from tests.unit.resolve_facts import DATA, on
from tests.unit.test_resolve_recorded_models import MODELS, recorded

KB = load()
DRIVER_580 = Driver("580.95.05", "13.0")     # takes every pin set: the question is the wheel, not the driver
SGLANG = [p for p in KB.pinsets if p.engine == "sglang"]


def facts(name: str, shape: str, driver: Driver | None = None):
    f = on(shape, model=recorded(DATA / "models" / name))
    return replace(f, driver=driver) if driver else f


def refused(f, variables=None, kb=KB) -> ResolveError:
    with pytest.raises(ResolveError) as info:
        resolve(f, variables or {}, kb=kb)
    return info.value


def test_the_wheels_say_what_the_issue_found_by_hand():
    # DeepseekV4ForCausalLM first in 0.5.12.post1; ModelOptFp4Config.get_min_capability() 100 before 0.5.17, 80 after
    assert registry.releases_with(KB, "DeepseekV4ForCausalLM")[0] == ["0.5.12.post1", "0.5.17", "0.5.23"]
    assert registry.releases_with(KB, "Step3p7FlashForCausalLM") == ([], [])
    floors = {v: d["quantization_floors"]["modelopt_fp4"] for v, d in KB.registry["sglang"].items()}
    assert floors == {"0.5.10.post1": 100, "0.5.12.post1": 100, "0.5.17": 80, "0.5.23": 80}
    assert KB.registry["pinsets"]["cu13-latest"] == {"sglang": "0.5.23", "transformers": "5.19.0"}


def test_a_model_type_neither_sglang_nor_its_transformers_knows_is_refused():
    # MiMo-V2-Flash's mimo_v2_flash: transformers 5.19.0 (cu13-latest) knows it, 5.12.1 (cu13-b) does not
    f = facts("mimo-v2-flash", "h200-x1", DRIVER_580)
    err = refused(f, {"pinset": "cu13-b", "tp": 1})
    assert "neither sglang 0.5.17 nor its transformers 5.12.1 knows model type mimo_v2_flash" in err.message


@pytest.mark.parametrize("folder", MODELS, ids=lambda d: d.name)
def test_the_wheels_agree_with_the_judge_on_every_recorded_config(folder):
    """Read by code, the registry and model types say sglang takes a config exactly where its own checks took it
    (compat/derived/sglang-choices.yml: a `rejected` plain command line other than for custom code)."""
    m = recorded(folder)
    for p in SGLANG:
        said = KB.sglang_pick(p.id, m.architectures[0], "9.0", m.model_type)
        if said is None:        # a config recorded after the last judge run: nothing to compare with
            continue
        judged = not said.get("rejected") or "trust_remote_code" in said["rejected"]
        static = bool(registry.serves(KB, p, m.architectures)) and (
            bool(m.custom_code) or bool(registry.configures(KB, p, m.model_type)))
        assert static == judged, f"{p.id}: {said.get('rejected')}"


def test_nvfp4_on_hopper_follows_each_pin_sets_floor():
    f = facts("qwen3.6-27b-nvfp4", "h200-x1")
    plan = resolve(f)
    assert plan.pinset == "cu13-latest"
    assert plan.decision("quantization floor").value == "modelopt_fp4 from compute capability 8.0"
    err = refused(f, {"pinset": "cu13-a"})
    assert "sglang 0.5.12.post1 runs modelopt_fp4 (nvfp4) from compute capability 10.0" in err.message
