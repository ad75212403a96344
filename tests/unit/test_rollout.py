"""serial / max_fail_percentage of a group, with Ansible's meaning (gpunode/rollout.py)."""

from __future__ import annotations

import pytest

from gpunode import rollout
from gpunode.engine.events import TargetRecap
from gpunode.errors import InventoryError


def recap(name: str, failed: int = 0) -> TargetRecap:
    return TargetRecap(name, failed=failed)


def test_batches_are_a_number_or_a_percentage_of_the_targets_as_ansible_cuts_them():
    nodes = [f"n{i}" for i in range(5)]
    assert rollout.batches(nodes, None) == [nodes]
    assert rollout.batches(nodes, 2) == [["n0", "n1"], ["n2", "n3"], ["n4"]]
    assert rollout.batches(nodes, "40%") == [["n0", "n1"], ["n2", "n3"], ["n4"]]  # 5 x 40% = 2
    assert rollout.batches(nodes, "10%") == [[n] for n in nodes]  # rounded down, at least one
    assert rollout.batches(nodes, 9) == [nodes]


@pytest.mark.parametrize("bad", ["two", "150%", "-1", True])
def test_a_serial_that_is_no_batch_is_refused_naming_it(bad):
    with pytest.raises(InventoryError, match="serial="):
        rollout.batch_size(bad, 4)


def test_a_batch_stops_the_group_past_max_fail_percentage_or_when_it_failed_whole():
    two = [recap("a", failed=1), recap("b")]
    assert rollout.stops(two, 50) == ""  # 50% is not more than 50%
    assert rollout.stops(two, 49).startswith("50% of the batch failed (a), more than max_fail_percentage 49")
    assert rollout.stops(two, None) == ""
    assert rollout.stops([recap("a", failed=1)], None) == "every target of the batch failed (a)"
    assert rollout.stops([recap("a"), recap("b")], 0) == ""
    with pytest.raises(InventoryError, match="max_fail_percentage=120"):
        rollout.max_fail(120)


def test_a_target_held_back_says_why_and_counts_as_not_run():
    seen = []
    r = rollout.held_back("kpro7/200", "every target of the batch failed (kpro6/200)", check=False, emit=seen.append)
    assert r.error == "not run: every target of the batch failed (kpro6/200)" and not r.succeeded
    assert seen[-1] is r and r.to_dict()["rolled_back"] == ""
