"""A group with a dead target provisions the rest (issue 30): the lab's stopped container 202 and
a host whose ssh port refuses are reported UNREACHABLE, a fresh container of the lab converges,
the run exits 4 (ansible-playbook's code for unreachable hosts) and `--json` ends with a recap."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from gpunode_lab import paths
from tests.lab.provision_helpers import INV, REPO, container_fixture, cpu_vars, lab_host, provision

pytestmark = pytest.mark.lab

VMID = 291  # made and removed by this module

box = container_fixture(VMID, 2048, "lab-unreachable", wheels=False)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def inventory(box, tmp_path_factory) -> Path:
    lab = lab_host()
    lab["containers"] = {VMID: {"vars": cpu_vars()}, paths.CT_STOPPED: {"vars": cpu_vars()}}
    dead = {k: lab[k] for k in ("address", "user", "key", "known_hosts")} | {"port": closed_port()}
    doc = {"hosts": {"lab": lab, "dead": dead}, "groups": {"mix": {"hosts": ["lab", "dead"]}}}
    path = tmp_path_factory.mktemp("inv") / "hosts.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def outcome(run) -> dict[str, tuple[bool, str]]:
    return {t["target"]: (t["unreachable"], t["error"].split("\n")[0]) for t in run.recap["targets"]}


def test_check_plans_the_live_target_and_reports_the_dead_ones(inventory):
    run = provision(inventory, None, "-g", "mix", "--check", host="")
    assert run.rc == 4, run.explain()
    assert run.events[-1]["type"] == "recap", run.explain()
    found = outcome(run)
    assert found[f"lab/{VMID}"] == (False, ""), run.explain()
    assert found["lab/202"] == (True, "lab/202: container 202 on lab is not running"), run.explain()
    assert found["dead"][0] and found["dead"][1].startswith("dead: cannot reach root@127.0.0.1:"), run.explain()
    assert run.recap["unreachable"] == 2 and run.recap["succeeded"] is False
    planned = {e["target"] for e in run.of("step")}
    assert planned == {f"lab/{VMID}"}, run.explain()


def test_the_live_target_converges_and_a_rerun_finds_nothing_to_do(box, inventory):
    # --only base: a real apply of the base role (packages, folders, uv) without the engine's minutes
    run = provision(inventory, None, "-g", "mix", "--only", "base", host="")
    assert run.rc == 4, run.explain()
    found = outcome(run)
    assert found[f"lab/{VMID}"] == (False, "") and found["lab/202"][0] and found["dead"][0], run.explain()
    mine = run.recap["targets"][[t["target"] for t in run.recap["targets"]].index(f"lab/{VMID}")]
    assert mine["changed"] > 0 and mine["failed"] == 0, run.explain()
    assert box.exists("/usr/local/bin/uv") and box.exists("/etc/gpunode")
    again = provision(inventory, VMID, "--only", "base")
    assert again.rc == 0 and again.target["changed"] == 0, again.explain()


def test_people_see_unreachable_in_the_recap_table(inventory):
    done = subprocess.run([str(INV), "provision", "-i", str(inventory), "-g", "mix", "-C"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 4, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {line.split("│")[1].strip(): line.split("│")[-2].strip()
            for line in done.stdout.splitlines() if line.startswith("│ ")}
    assert rows == {f"lab/{VMID}": "ok", "lab/202": "UNREACHABLE", "dead": "UNREACHABLE"}, done.stdout[-3000:]
