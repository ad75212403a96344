"""emittable() lists what the resolver really emits: every flag of the recorded cases' plans is in it.

tests/test_wheel_flags.py proves emittable()'s flags against the sglang wheels;
this file ties emittable() to the plans, so the proof covers real command lines.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpunode.errors import ResolveError
from gpunode.facts.types import Driver, Model
from gpunode.resolve import resolve
from gpunode.resolve.emittable import ANY, Use, emittable, pairs
from gpunode.resolve.kb import Parsers
from gpunode.resolve.load import load
from tests.unit.resolve_facts import GB, QWEN36, QWEN36_MTP, cpu_box, field_notes, h200, on

KB = load()
QWEN36_SMALL = replace(QWEN36, size_bytes=16 * GB)
# Qwen3.6-35B-A3B NVFP4 (docs/sources.md#qwen36-cookbook's B200 cells) and Qwen3-Next:
# built from the KB families' classes
QWEN36_MOE_NVFP4 = replace(QWEN36, path="/models/Qwen3.6-35B-A3B-NVFP4", size_bytes=22 * GB, quantization="nvfp4",
                           architectures=("Qwen3_5MoeForConditionalGeneration",))
QWEN3_NEXT = Model(path="/models/Qwen3-Next-80B-A3B-Instruct", architectures=("Qwen3NextForCausalLM",),
                   model_type="qwen3_next", hybrid_linear_attention=True, dtype="bfloat16", size_bytes=60 * GB)
B200_580 = replace(on("b200-x8"), driver=Driver("580.95.05", "13.0"))

# (case id, facts, inventory variables): the recorded GPU shapes of tests/unit, each pin set and knob
CASES = [
    ("field-notes", field_notes(), {}),
    ("field-notes-mtp-weights", field_notes(model=QWEN36_MTP), {}),
    ("field-notes-cu13-b", field_notes(), {"pinset": "cu13-b"}),
    ("field-notes-cu13-a", field_notes(), {"pinset": "cu13-a"}),
    ("field-notes-cu12-legacy", field_notes(), {"pinset": "cu12-legacy"}),
    ("field-notes-vllm", field_notes(), {"engine": "vllm"}),
    ("field-notes-triton-extra-buffer", field_notes(),
     {"attention_backend": "triton", "mamba_strategy": "extra_buffer"}),
    ("field-notes-context", field_notes(), {"context_length": 131072}),
    ("h200-snapshot", h200(), {}),
    ("h200-mtp-weights", h200(QWEN36_MTP), {}),
    ("b200-x8", on("b200-x8"), {}),
    ("b200-qwen36-moe-nvfp4", replace(B200_580, model=QWEN36_MOE_NVFP4), {}),
    ("h200-qwen3-next", h200(QWEN3_NEXT), {}),
    ("b200-qwen3-next-mamba-auto", replace(B200_580, model=QWEN3_NEXT), {"mamba_strategy": "auto"}),
    ("gb10", on("gb10-x1", system=replace(on("gb10-x1").system, arch="aarch64")), {}),
    ("rtx-pro-6000-tp4", on("rtx-pro-6000-x6-editions"), {"tp": 4}),
    ("5090-small-model", on("mixed-5090-4090", model=QWEN36_SMALL), {"gpus": [0]}),
    ("cpu-lab", cpu_box(), {}),
]


def plan_uses(plan) -> list[Use]:
    return [u for s in plan.servers for u in pairs(s.args, s.name)]


def covered(u: Use, em) -> bool:
    values = em.values(u.flag)
    return u.value in values or ANY in values


def resolved_cases():
    out = []
    for name, facts, variables in CASES:
        try:
            out.append((name, resolve(facts, variables)))
        except ResolveError:
            continue
    return out


def test_most_recorded_cases_resolve_so_the_comparison_means_something():
    plans = resolved_cases()
    assert len(plans) >= 15, [n for n, _ in plans]
    nvfp4 = dict(plans)["b200-qwen36-moe-nvfp4"]
    # the MoE runner is sglang's own choice: it rejects flashinfer_cutlass for this mixed-precision checkpoint
    assert "--moe-runner-backend" not in {u.flag for u in plan_uses(nvfp4)}
    engines = {p.engine for _, p in plans}
    assert engines == {"sglang", "vllm", "vllm-cpu"}


@pytest.mark.parametrize("name, facts, variables", CASES, ids=[c[0] for c in CASES])
def test_every_flag_and_value_a_plan_emits_is_in_the_emittable_set(name, facts, variables):
    try:
        plan = resolve(facts, variables)
    except ResolveError:
        pytest.skip(f"{name} is refused by the resolver")
    em = emittable(KB, KB.pinset(plan.pinset))
    missing = [f"{u.flag} {u.value}" for u in plan_uses(plan) if not covered(u, em)]
    assert not missing, f"{name} (pin set {plan.pinset}) emits what emittable() does not list: {missing}"
    assert not set(em.removed) & {u.flag for u in plan_uses(plan)}


def rows_of(em, flag: str, value: str | None) -> list[str]:
    return [u.where for u in em.uses if (u.flag, u.value) == (flag, value)]


def test_the_field_notes_plan_flags_are_listed_with_their_kb_rows():
    plan = resolve(field_notes(), {"mamba_strategy": "no_buffer"})
    em = emittable(KB, KB.pinset(plan.pinset))
    emitted = {(u.flag, u.value) for u in plan_uses(plan)}
    assert "--attention-backend" not in {f for f, _ in emitted}    # sglang's own pick on sm_120
    assert ("--mamba-radix-cache-strategy", "no_buffer") in emitted
    assert ("--disable-overlap-schedule", None) in emitted
    assert any("requires[no_buffer]" in w for w in rows_of(em, "--disable-overlap-schedule", None))
    def rows(flag: str, value: str | None) -> list[str]:
        return [u.where for u in em.uses if (u.flag, u.value) == (flag, value)]

    assert any(w.startswith("gpus.yml:") and "archs[12.0]" in w for w in rows("--attention-backend", "flashinfer"))
    assert any("requires[no_buffer]" in w for w in rows("--disable-overlap-schedule", None))
    assert any(w.startswith("models.yml:") and "qwen3_5]" in w for w in rows("--reasoning-parser", "qwen3"))
    assert em.removed == {"--mamba-scheduler-strategy": em.removed["--mamba-scheduler-strategy"]}


def test_a_familys_preferred_backend_is_listed_with_its_row():
    """The B200 plan of the recorded Qwen3.6 config passes the cookbook's trtllm_mha (models.yml attention_prefer):
    the wheel flag test proves it through emittable()."""
    from tests.unit.test_resolve_sglang_picks import b200

    plan = resolve(b200("qwen3.6-27b-nvfp4"), {"pinset": "cu13-latest"})
    assert ("--attention-backend", "trtllm_mha") in {(u.flag, u.value) for u in plan_uses(plan)}
    em = emittable(KB, KB.pinset("cu13-latest"))
    assert any("qwen3_5].attention_prefer[10.0]" in w for w in rows_of(em, "--attention-backend", "trtllm_mha"))


def test_the_mtp_and_choice_values_are_listed_even_when_no_recorded_case_emits_them():
    em = emittable(KB, KB.pinset("cu13-latest"))
    assert {"auto", "no_buffer", "extra_buffer", "extra_buffer_lazy"} <= em.values("--mamba-radix-cache-strategy")
    assert em.values("--speculative-algorithm") == {"EAGLE"}
    assert {"fa3", "fa4", "trtllm_mha", "flashinfer", "triton"} <= em.values("--attention-backend")
    assert None in em.values("--disable-custom-all-reduce")   # a switch, from gpus.yml's tp.args
    old = emittable(KB, KB.pinset("cu13-a"))
    assert "--mamba-radix-cache-strategy" not in old.flags()
    assert "extra_buffer_lazy" not in old.values("--mamba-scheduler-strategy")


def test_a_new_kb_row_is_listed_without_a_code_change():
    fam = KB.families[0]
    new = replace(fam, parsers={**fam.parsers, "sglang": Parsers(reasoning="brand-new", tool_call="other-new",
                                                                  args=("--new-switch",))})
    kb = replace(KB, families=(new, *KB.families[1:]))
    em = emittable(kb, kb.pinset("cu13-latest"))
    assert "brand-new" in em.values("--reasoning-parser") and "other-new" in em.values("--tool-call-parser")
    assert em.values("--new-switch") == {None}


def test_a_family_newer_than_the_pinset_is_left_out():
    newest = KB.pinset("cu13-latest")
    fam = replace(KB.families[0], min_engine={"sglang": "9.9"},
                  parsers={"sglang": Parsers(reasoning="only-in-9.9")})
    kb = replace(KB, families=(fam,))
    assert "only-in-9.9" not in emittable(kb, newest).values("--reasoning-parser")
