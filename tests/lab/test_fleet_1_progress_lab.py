"""Live progress of a real `inv provision --json -vv` on a fresh cpu-profile container: the engine
venv install in packages, the weight staging in bytes, the readiness wait with each server's
state, in order and complete; -vv streams the target's lines; doctor then finds the fleet healthy.
The run is the shared fleet's provision (tests/lab/shared_fleet.py)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.lab.provision_helpers import INV, REPO
from tests.lab.shared_fleet import VMID

pytestmark = [pytest.mark.lab, pytest.mark.slow]


@pytest.fixture(scope="module")
def run(fleet):
    return fleet.inventory, fleet.run


def of(result, step: str) -> list[dict]:
    return [e for e in result.of("progress") if e["step"] == step]


def test_each_long_step_reports_in_order_until_complete(run):
    _, result = run
    for step, unit in (("engine", "packages"), ("weights", "bytes"), ("ready", "servers")):
        seen = of(result, step)
        assert seen, f"no {step} progress:\n{result.explain()}"
        assert {e["unit"] for e in seen} == {unit} and {e["target"] for e in seen} == {f"lab/{VMID}"}
        assert all(e["done"] >= 0 and (e["total"] == 0 or e["done"] <= e["total"]) for e in seen)
        assert seen[-1]["done"] == seen[-1]["total"] > 0, seen[-1]
    engine = of(result, "engine")
    assert engine[0]["detail"].startswith("engine venv (") and engine[0]["done"] == 0
    assert engine[-1]["detail"].endswith(": installed and verified")
    ready = of(result, "ready")
    assert ready[-1]["detail"] == "cpu0 ready, cpu1 ready, router ready" and ready[-1]["total"] == 3
    assert [e["done"] for e in ready] == sorted(e["done"] for e in ready)
    # Each progress line comes before the event of the step it belongs to.
    steps = [e for e in result.events if e.get("type") in ("step", "progress")]
    last_ready = max(i for i, e in enumerate(steps) if e["type"] == "progress" and e["step"] == "ready")
    assert any(e["type"] == "step" and e["step"].startswith("ready:") for e in steps[last_ready:])


def test_apt_reports_its_own_status_as_a_percentage(run):
    _, result = run
    apt = [e for e in result.events if e.get("type") == "step" and e["step"].startswith("apt:")]
    assert apt and apt[0]["status"] == "changed", "a fresh container lacks some base packages"
    seen = of(result, "apt")
    assert seen and {e["unit"] for e in seen} == {"percent"} and {e["total"] for e in seen} == {100}
    assert any(e["detail"].startswith("install: ") for e in seen), [e["detail"] for e in seen]
    print("apt progress:", [(e["done"], e["detail"]) for e in seen])


def test_verbose_streams_the_targets_lines(run):
    _, result = run
    streamed = [line for line in result.stderr.splitlines() if line.startswith(f"lab/{VMID} | ")]
    assert any("Installed" in line and "packages" in line for line in streamed), result.stderr[-3000:]
    assert f"lab/{VMID} | @@ready gpunode-router.service" in streamed


def test_doctor_finds_the_provisioned_fleet_healthy(run):
    inventory, _ = run
    proc = subprocess.run([str(INV), "doctor", "-i", str(inventory), "--host", "lab", "--ct", str(VMID), "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    doc = json.loads(proc.stdout)
    (target,) = doc["targets"]
    assert proc.returncode == 0 and target["findings"] == [], target["findings"]
    assert {u["name"]: u["active"] for u in target["units"]}["gpunode-router.service"] == "active"
    assert target["journal_lines"] > 0
