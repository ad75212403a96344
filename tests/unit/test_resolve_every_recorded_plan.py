"""Issue 38, items 2 and 3, over every plan CI's judge is given: each recorded model config
(tests/data/models, each folder's SOURCE) on each recorded GPU report (tests/data/nvidia-smi) with each
SGLang pin set, on a driver every pin set accepts.

- No plan names an architecture its pin set's sglang does not have: the wheel's model registry, read by
  `inv kb.refresh` into compat/derived/sglang-registry.yml, holds the config's architecture.
- No `--attention-backend` is forced without a sourced rule: a plan that passes the flag says which rule
  chose it and where that rule comes from (a family row of compat/models.yml, the GPU row of compat/gpus.yml
  for an architecture whose SGLang pick is derived, or the inventory), and a plan that leaves the choice
  to SGLang passes no flag."""

from __future__ import annotations

import functools

import pytest

from gpunode.errors import ResolveError
from gpunode.facts.types import Driver, Facts, Install
from gpunode.resolve import registry, resolve
from gpunode.resolve.load import load
from tests.unit.resolve_facts import DATA, KPRO6_CT, smi
from tests.unit.test_resolve_recorded_models import MODELS, recorded

KB = load()
SGLANG = [p for p in KB.pinsets if p.engine == "sglang"]
DRIVER = Driver("580.95.05", "13.0")


@functools.cache
def shapes() -> dict[str, tuple]:
    out = {}
    for folder in sorted((DATA / "nvidia-smi").iterdir()):
        if not folder.is_dir():
            continue
        try:
            gpus, _ = smi(folder.name)
        except Exception:       # a report gpunode refuses to read is no plan
            continue
        # a box with MIG on some GPUs: its whole GPUs, as CI's judge plans it
        gpus = tuple(g for g in gpus if g.mig_mode != "Enabled") or gpus
        if gpus:
            out[folder.name] = gpus
    return out


@functools.cache
def plans(pinset: str) -> list[tuple[str, object, object]]:
    out = []
    for folder in MODELS:
        model = recorded(folder)
        for shape, gpus in shapes().items():
            facts = Facts(f"judge/{shape}", gpus, DRIVER, KPRO6_CT, Install(), model)
            try:
                out.append((f"{shape}/{folder.name}", resolve(facts, {"pinset": pinset}), model))
            except ResolveError:
                continue
    return out


@pytest.mark.parametrize("pinset", [p.id for p in SGLANG])
def test_no_plan_names_an_architecture_its_pin_sets_sglang_does_not_have(pinset):
    made = plans(pinset)
    assert made, "no plan was made: the test checked nothing"
    p = KB.pinset(pinset)
    wrong = [case for case, _, model in made if registry.serves(KB, p, model.architectures) is not True]
    assert not wrong, f"sglang {p.version}'s model registry lacks the architecture of: {wrong[:10]}"


@pytest.mark.parametrize("pinset", [p.id for p in SGLANG])
def test_no_attention_backend_is_forced_without_a_sourced_rule(pinset):
    forced, left = 0, 0
    for case, plan, model in plans(pinset):
        argv = list(plan.servers[0].argv)
        decided = plan.decision("attention backend")
        assert decided is not None, case
        if decided.value.startswith("left to SGLang"):
            left += 1
            assert "--attention-backend" not in argv, f"{case}: {decided.reason}"
            continue
        forced += 1
        assert argv[argv.index("--attention-backend") + 1] == decided.value, case
        assert decided.rule and decided.source, f"{case}: {decided.value} without a rule and its source"
        arch = model.architectures[0]
        cc = plan.servers[0].gpus and next(g.compute_cap for g in shapes()[case.split("/")[0]]
                                           if g.index in plan.servers[0].gpus)
        by_family = decided.rule.startswith("compat/models.yml")
        derived = KB.sglang_pick(pinset, arch, str(cc), model.model_type, model.quantization_form)
        # the GPU row's default only where SGLang's own pick for this architecture is derived (and a rule says
        # it fails there): an architecture nothing names keeps SGLang's choice
        assert by_family or derived is not None, f"{case}: {decided.value} from {decided.rule} for {arch}, " \
            "which no family rule names and whose SGLang pick is not derived"
    assert forced and left, (forced, left)

