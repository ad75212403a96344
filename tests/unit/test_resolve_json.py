"""The plan's JSON form matches what docs/resolve.md documents, key for key."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from gpunode.errors import ResolveError
from gpunode.facts.types import Driver
from gpunode.resolve import SCHEMA, resolve
from gpunode.resolve.report import REFUSAL_SCHEMA, refusal_json
from tests.unit.resolve_facts import GB, QWEN36, cpu_box, field_notes

DOC = Path(__file__).resolve().parents[2] / "docs" / "resolve.md"


def documented() -> dict[str, set[str]]:
    """`### heading` -> the keys in the first column of its table."""
    out: dict[str, set[str]] = {}
    heading = None
    for line in DOC.read_text().splitlines():
        if line.startswith("### "):
            heading = line[4:].strip().strip("`")
            out[heading] = set()
        elif heading and line.startswith("| `"):
            first = line.split("|")[1]
            out[heading] |= set(re.findall(r"`([a-z_]+)`", first))
    return out


def test_documented_keys_are_the_plans_keys():
    doc = documented()
    plan = json.loads(resolve(field_notes(), {"model_source": "/mnt/models/Qwen3.6-27B"}).to_json())
    assert plan["schema"] == SCHEMA == "gpunode.plan/1"
    assert set(plan) == doc["Top level"]
    for section, value in (("packages[]", plan["packages"][0]), ("indexes", plan["indexes"]),
                           ("toolkit", plan["toolkit"]), ("topology", plan["topology"]),
                           ("servers[]", plan["servers"][0]), ("router", plan["router"]),
                           ("fixes[]", plan["fixes"][0]), ("model", plan["model"]),
                           ("decisions[]", plan["decisions"][0]), ("facts", plan["facts"]),
                           ("facts.gpus[]", plan["facts"]["gpus"][0]), ("facts.driver", plan["facts"]["driver"]),
                           ("facts.system", plan["facts"]["system"]), ("lock", plan["lock"]),
                           ("weights", plan["weights"])):
        assert set(value) == doc[section], section


def test_the_plan_carries_the_facts_it_was_made_from():
    facts = json.loads(resolve(field_notes()).to_json())["facts"]
    assert [(g["index"], g["compute_cap"]) for g in facts["gpus"]] == [(i, "12.0") for i in range(8)]
    assert facts["driver"] == {"version": "590.48.01", "cuda": "13.1"}
    assert facts["system"]["glibc"] == "2.36" and facts["system"]["toolkits"][0]["version"] == "12.8"


def test_documented_refusal_keys_are_the_refusals_keys():
    doc = documented()
    facts = field_notes(driver=Driver("565.57.01", "12.7"))
    with pytest.raises(ResolveError) as info:
        resolve(facts)
    out = json.loads(refusal_json(info.value, facts))
    assert out["schema"] == REFUSAL_SCHEMA == "gpunode.refusal/1"
    assert set(out) == doc["Refusal top level"]
    assert set(out["blockers"][0]) == doc["blockers[]"]
    assert set(out["facts"]) == doc["facts"]
    # every pin set's blocker with its unblock
    by_set = {(b["pinset"], b["check"]): b for b in out["blockers"]}
    assert by_set[("cu12-legacy", "driver")]["need"] == "570"
    assert by_set[("cu12-legacy", "driver")]["unblock"] == "upgrade the host's NVIDIA driver to >= 570"
    assert by_set[("cu13-latest", "driver")]["text"] == "driver 565.57.01 < 580 (CUDA 13.0)"
    assert out["facts"]["driver"] == {"version": "565.57.01", "cuda": "12.7"}


def test_a_rule_that_blocks_every_pinset_is_one_blocker():
    facts = field_notes(model=replace(QWEN36, size_bytes=2000 * GB))
    with pytest.raises(ResolveError) as info:
        resolve(facts)
    (b,) = json.loads(refusal_json(info.value, facts))["blockers"]
    assert b["pinset"] is None and b["check"] == "rule" and "does not fit on 8 GPU(s)" in b["text"]
    assert b["unblock"] == info.value.hint


def test_documented_decision_names_cover_the_ones_made():
    text = DOC.read_text()
    made = {d["decision"] for p in (resolve(field_notes()), resolve(cpu_box()))
            for d in p.to_dict()["decisions"]}
    for name in made:
        assert f"`{name}`" in text, name


def test_json_is_plain_data_and_round_trips():
    plan = resolve(cpu_box())
    text = plan.to_json()
    again = json.loads(text)
    assert json.dumps(again, indent=2, ensure_ascii=False) == text
    assert again["servers"][0]["argv"][0].endswith("/bin/python")
