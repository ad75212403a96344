"""The plan's JSON form matches what docs/resolve.md documents, key for key."""

from __future__ import annotations

import json
import re
from pathlib import Path

from gpunode.resolve import SCHEMA, resolve
from tests.unit.resolve_facts import cpu_box, field_notes

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
    plan = json.loads(resolve(field_notes()).to_json())
    assert plan["schema"] == SCHEMA == "gpunode.plan/1"
    assert set(plan) == doc["Top level"]
    for section, value in (("packages[]", plan["packages"][0]), ("indexes", plan["indexes"]),
                           ("toolkit", plan["toolkit"]), ("topology", plan["topology"]),
                           ("servers[]", plan["servers"][0]), ("router", plan["router"]),
                           ("fixes[]", plan["fixes"][0]), ("model", plan["model"]),
                           ("decisions[]", plan["decisions"][0])):
        assert set(value) == doc[section], section


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
