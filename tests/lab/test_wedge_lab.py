"""One bad run must not wedge a target (issue 29): the real CLI on a container of its own.

1. `model_source` ending in `/..` (which staged into /dev/shm/.. and walked all of /dev) is refused
   before anything runs, naming the key and the folder it means;
2. a recorded probe that hangs (a hung mount under a probed path looks the same) is ended at the
   probe's deadline with all it started: the run fails naming the deadline, nothing holds the lock,
   the hanging batch is dropped and the next run with the same inventory goes through;
3. whatever holds the lock, a gpunode lock shell or not, `inv unlock` ends it and names it.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from gpunode import roles
from gpunode.engine import recorded
from tests.lab.provision_helpers import INV, REPO, container_fixture, cpu_inventory_fixture, provision

pytestmark = pytest.mark.lab

VMID = 236  # made and removed by this module
STATE = "/var/lib/gpunode"
DEADLINE = 8  # GPUNODE_PROBE_DEADLINE for these runs, seconds

box = container_fixture(VMID, 2048, "lab-wedge", wheels=False)
inventory = cpu_inventory_fixture(VMID)

# Every process in the container that has the lock file open, and every `find` (what the bad run's
# recorded probe left running): pid and program.
HOLDERS = """for p in $(find /proc/[0-9]*/fd -maxdepth 1 -lname "$1/lock" 2>/dev/null | cut -d/ -f3 | sort -u); do
  echo "lock $p $(cat /proc/$p/comm)"; done
for p in $(pgrep -x find); do echo "find $p"; done; true"""


def holders(box) -> list[str]:
    return box.sh(HOLDERS, STATE).out.splitlines()


def test_1_a_model_source_ending_in_dotdot_is_refused_before_anything_runs(box, inventory):
    run = provision(inventory, VMID, "--set", "model_source=/mnt/lab/models/tiny-qwen3/..", timeout=120)
    assert run.rc == 2, run.explain()
    assert "model_source" in run.stderr and "'..'" in run.stderr and "(/mnt/lab/models)" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert not box.exists(STATE), "a refused run created the state folder"
    assert holders(box) == []


def test_2_a_recorded_probe_that_hangs_is_ended_at_its_deadline_and_the_next_run_goes_through(
        box, inventory, monkeypatch):
    monkeypatch.setenv("GPUNODE_PROBE_DEADLINE", str(DEADLINE))
    # What the bad run of issue 29 recorded: its weights probe, a find -L over /dev/shm/.. (= /dev).
    planted = f"{STATE}/probe-{recorded.key_for(list(roles.order()))}.sh"
    box.sh('mkdir -p "$(dirname "$1")" && printf "# gpunode-probe %064d\\n%s\\n" 0 "$2" > "$1"',
           planted, "find -L /dev/shm/.. >/dev/null 2>&1")
    started = time.monotonic()
    run = provision(inventory, VMID, "--check", timeout=120)
    took = time.monotonic() - started
    print(f"\nthe check with a hanging recorded probe failed after {took:.1f} s (deadline {DEADLINE} s): "
          f"{run.stderr.strip()[:300]}")
    assert run.rc == 2, run.explain()
    said = run.target["error"]  # a target stopped before its steps is its recap line (issue 43)
    assert f"did not answer within {DEADLINE} s" in said and "let go of the lock" in said, run.explain()
    assert took < DEADLINE + 30, took
    assert holders(box) == [], "a process of the ended probe outlived it"
    assert not box.exists(planted), "the hanging batch is still recorded: every later run would replay it"
    again = provision(inventory, VMID, "--check", timeout=120)
    assert again.rc == 0 and again.recap["succeeded"], again.explain()
    assert holders(box) == []


def test_3_unlock_ends_whatever_holds_the_lock_and_names_it(box, inventory):
    box.sh(f'mkdir -p {STATE} && (flock -x {STATE}/lock sleep 1000 >/dev/null 2>&1 &) && true')
    before = holders(box)
    assert len([h for h in before if h.startswith("lock ")]) == 2, before  # flock and its sleep
    busy = provision(inventory, VMID, "--check", timeout=120)
    assert busy.rc == 2 and "locked by another gpunode run" in busy.target["error"], busy.explain()
    assert "inv unlock" in busy.target["error"], busy.explain()
    said = subprocess.run([str(INV), "unlock", "-i", str(inventory), "--host", "lab", "--ct", str(VMID)],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    print(f"\ninv unlock: {said.stdout.strip()}")
    assert said.returncode == 0, said.stderr
    assert "ended lock holder process" in said.stdout and "(flock)" in said.stdout and "(sleep)" in said.stdout
    assert said.stdout.strip().endswith("the lock is free")
    assert holders(box) == []
    after = provision(inventory, VMID, "--check", timeout=120)
    assert after.rc == 0 and after.recap["succeeded"], after.explain()
