"""The --json lines of a real run match docs/events.md field for field, like the plan's schema
matches docs/resolve.md: a field added to an event without its row in the doc fails here."""

from __future__ import annotations

import io
import json
import re
from datetime import datetime
from pathlib import Path

from gpunode.engine import RolePlan, run_target
from gpunode.engine.events import Progress
from gpunode.engine.journal import read as read_journal
from gpunode.engine.lock import Owner
from gpunode.report import JsonLines
from gpunode.steps.files import Directory, File
from tests.unit.engine_helpers import CountingTransport

DOC = Path(__file__).resolve().parents[2] / "docs" / "events.md"


def documented() -> tuple[set[str], dict[str, tuple[set[str], set[str]]]]:
    """(fields of every line, type -> (required fields, optional fields)) from the doc's tables."""
    common: set[str] = set()
    types: dict[str, tuple[set[str], set[str]]] = {}
    heading: list[str] = []
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            title = line[3:].split(":")[0]
            heading = ["*"] if title == "Every line" else re.findall(r"`([a-z_]+)`", title)
            for t in heading:
                if t != "*":
                    types[t] = (set(), set())
        elif heading and line.startswith("| `"):
            cells = line.split("|")
            name = re.findall(r"`([a-z_]+)`", cells[1])[0]
            for t in heading:
                if t == "*":
                    common.add(name)
                elif name not in common:
                    types[t][1 if "optional" in cells[2] else 0].add(name)
    return common, types


def run_lines(root: Path, state: str, *, check: bool = False) -> tuple[list[dict], str]:
    out = io.StringIO()
    run_id = "20261203-094713-1a2b3c"
    sink = JsonLines(out, run_id=run_id)
    role = RolePlan("demo", [Directory(str(root / "etc")), File(str(root / "etc/a.conf"), "port=1\n")], {})
    sink.plan("box", {"schema": "gpunode.plan/1"})
    recap = run_target(CountingTransport("box"), [role], check=check, diff=check, emit=sink, state_dir=state,
                       owner=Owner.current(run_id))
    sink(Progress("box", "weights", 5, 10, "bytes", "model-00001-of-00002.safetensors"))
    sink.finish([recap])
    return [json.loads(x) for x in out.getvalue().splitlines()], run_id


def test_every_line_has_exactly_the_documented_fields(tmp_path):
    common, types = documented()
    assert common == {"v", "type", "ts", "run"}
    assert set(types) == {"start", "plan", "step", "handler", "progress", "target", "recap"}
    seen = set()
    for check in (True, False):
        lines, _ = run_lines(tmp_path / f"t{check}", str(tmp_path / f"s{check}"), check=check)
        for line in lines:
            required, optional = types[line["type"]]
            extra = set(line) - common
            assert required <= extra <= required | optional, (line["type"], extra ^ required)
            seen.add(line["type"])
    assert seen == {"start", "plan", "step", "progress", "target", "recap"}


def test_lines_carry_a_utc_timestamp_in_order_and_the_journals_run_id(tmp_path):
    state = str(tmp_path / "state")
    lines, run_id = run_lines(tmp_path / "t", state)
    stamps = [datetime.strptime(x["ts"], "%Y-%m-%dT%H:%M:%S.%fZ") for x in lines]
    assert stamps == sorted(stamps)
    assert (stamps[-1] - datetime.utcnow()).total_seconds() < 5
    assert {x["run"] for x in lines} == {run_id}
    # The same id is what the target's journal recorded for the changes of this run.
    entries = read_journal(CountingTransport("box"), state)
    assert entries and {e["run"] for e in entries} == {run_id}


def test_progress_lines_are_throttled_but_the_last_one_always_comes():
    out = io.StringIO()
    sink = JsonLines(out)
    for done in range(0, 101):
        sink(Progress("box", "weights", done, 100))
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [x["done"] for x in lines] == [0, 100]
