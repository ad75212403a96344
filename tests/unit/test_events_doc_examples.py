"""The examples and the statements of docs/events.md against real runs (issue 30): each example
line has the fields of a real line of its type, in the order gpunode writes them; the event order,
the roles and a no-op's round trips that the page states are what `inv provision` and the engine
do; the recap example adds up."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from gpunode.engine import RolePlan, run_target
from gpunode.engine.events import Progress
from gpunode.report import JsonLines
from gpunode.steps.files import Directory, File
from tests.unit.engine_helpers import CountingTransport

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "events.md").read_text()
H200 = ROOT / "tests" / "data" / "snapshots" / "h200"  # recorded: see its README.md
INVENTORY = """\
hosts:
  kpro6:
    address: 127.0.0.1
    port: 1
    containers:
      200: {gpus: [0], vars: {model_source: /mnt/models/m, tp: 1}}
"""


def examples() -> dict[str, dict]:
    out = {}
    for block in re.findall(r"```json\n(.*?)```", DOC, re.S):
        line = json.loads(block)
        out[line["type"]] = line
    return out


@pytest.fixture
def provision_lines(tmp_path, capsys) -> list[dict]:
    """A real `gpunode provision --json` of one target from a recorded snapshot; nothing listens
    on port 1, so its steps are skipped and the target line carries the error."""
    from gpunode.cli.main import main

    (tmp_path / "hosts.yml").write_text(INVENTORY)
    with contextlib.suppress(SystemExit):
        main(["gpunode", "provision", "-i", str(tmp_path / "hosts.yml"), "--host", "kpro6", "--ct", "200",
              "--facts", str(H200), "--json"])
    return [json.loads(x) for x in capsys.readouterr().out.splitlines()]


def noop_round_trips(tmp_path: Path) -> int:
    """A real engine run that changes two things, then its no-op re-run's round trips."""
    state = str(tmp_path / "state")

    def roles() -> list[RolePlan]:
        return [RolePlan("demo", [Directory(str(tmp_path / "etc")), File(str(tmp_path / "etc/a.conf"), "port=1\n")])]

    assert run_target(CountingTransport("box"), roles(), state_dir=state).changed == 2
    again = run_target(CountingTransport("box"), roles(), state_dir=state)
    assert (again.changed, again.ok) == (0, 2)
    return again.round_trips


def test_each_example_has_a_real_lines_fields_in_order(provision_lines, tmp_path):
    real = {line["type"]: line for line in provision_lines}
    out = io.StringIO()
    JsonLines(out)(Progress("box", "weights", 5, 10, "bytes", "model-00001-of-00002.safetensors"))
    real["progress"] = json.loads(out.getvalue())
    for kind, example in examples().items():
        if kind in ("step", "handler"):
            continue  # optional fields (diff, commands): test_events_doc checks them against the tables
        assert list(example) == list(real[kind]), kind
    recap_entry = real["recap"]["targets"][0]
    for entry in examples()["recap"]["targets"]:
        assert list(entry) == list(recap_entry)


def test_the_stated_order_is_the_order_of_a_real_provision(provision_lines):
    stated = re.search(r"within one target they come in this order: (.*?);", DOC, re.S)
    assert stated, "docs/events.md no longer states the order"
    order = re.findall(r"`([a-z]+)`", stated.group(1))
    seen = [line["type"] for line in provision_lines if line["type"] != "recap"]
    assert [t for t in order if t in seen] == list(dict.fromkeys(seen))
    assert provision_lines[-1]["type"] == "recap"


def test_the_start_example_lists_the_roles_provision_runs(provision_lines):
    [start] = [line for line in provision_lines if line["type"] == "start"]
    assert examples()["start"]["roles"] == start["roles"]


def test_the_round_trips_the_page_states_for_a_noop(tmp_path):
    stated = re.search(r"a no-op re-run costs (\d+)", DOC)
    assert stated, "docs/events.md no longer states a no-op's round trips"
    noop = noop_round_trips(tmp_path)
    assert int(stated.group(1)) == noop
    target = examples()["target"]
    if target["changed"] == target["failed"] == 0 and not target["error"]:
        assert target["round_trips"] == noop


def test_the_recap_example_adds_up():
    recap = examples()["recap"]
    for key in ("ok", "changed", "failed", "skipped"):
        assert recap[key] == sum(t[key] for t in recap["targets"]), key
    assert recap["duration"] == max(t["duration"] for t in recap["targets"])
    assert recap["succeeded"] == all(not t["error"] and not t["failed"] for t in recap["targets"])
