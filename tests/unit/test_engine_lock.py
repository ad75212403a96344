"""The per-target lock: refusal names the holder, dead holders release it, hung ones can be broken."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpunode.engine import RolePlan, run_target
from gpunode.engine.lock import Owner, acquire, break_lock
from gpunode.errors import LockError
from gpunode.steps.files import File
from gpunode.transport import LocalTransport
from tests.unit.engine_helpers import Collect, CountingTransport, snapshot

ALICE = Owner(user="alice", workstation="ws1", pid=4242, started="2026-01-02T03:04:05Z",
              task="inv provision", run_id="r-alice")

HOLDER = """
import sys
from gpunode.engine.lock import Owner, acquire
from gpunode.transport import LocalTransport
owner = Owner("bob", "ws2", 77, "2026-01-01T00:00:00Z", "inv provision", "r-bob")
held = acquire(LocalTransport(), sys.argv[1], owner)
print("locked", flush=True)
sys.stdin.read()
"""


def start_holder(state: str) -> subprocess.Popen:
    """Another gpunode process that takes the lock and keeps it until it dies."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, state], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "locked"
    return proc


def acquire_within(state: str, seconds: float):
    deadline = time.monotonic() + seconds
    while True:
        try:
            return acquire(LocalTransport(), state, ALICE)
        except LockError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)  # polling the lock, bounded by the deadline


@pytest.fixture
def state(tmp_path: Path) -> str:
    return str(tmp_path / "state")


def test_a_second_run_is_refused_and_told_who_holds_the_lock(tmp_path, state):
    target = tmp_path / "x.conf"
    with acquire(LocalTransport(), state, ALICE):
        before = snapshot(tmp_path)
        seen = Collect()
        counted = CountingTransport()
        recap = run_target(counted, [RolePlan("r", [File(str(target), "x\n")])], emit=seen, state_dir=state)
        assert isinstance(recap.exc, LockError)
        assert "locked by another gpunode run: alice@ws1 (pid 4242, run r-alice" in recap.error
        assert recap.error.count("inv provision") == 1
        assert seen.events == [] and recap.skipped == 1 and not recap.succeeded
        assert len(counted.commands) == 1
        assert snapshot(tmp_path) == before
    assert run_target(LocalTransport(), [RolePlan("r", [File(str(target), "x\n")])], state_dir=state).succeeded


def test_check_runs_share_the_lock_but_exclude_applying_runs(state):
    with acquire(LocalTransport(), state, ALICE), pytest.raises(LockError, match="alice@ws1"):
        acquire(LocalTransport(), state, ALICE, shared=True)
    with acquire(LocalTransport(), state, ALICE, shared=True), \
            acquire(LocalTransport(), state, ALICE, shared=True), \
            pytest.raises(LockError, match="a check run"):
        acquire(LocalTransport(), state, ALICE)


def test_a_lock_left_by_a_killed_run_is_free_again(state):
    holder = start_holder(state)
    with pytest.raises(LockError, match="bob@ws2"):
        acquire(LocalTransport(), state, ALICE)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    acquire_within(state, 10).release()


def test_break_lock_ends_a_hung_holder_and_names_it(state):
    holder = start_holder(state)
    try:
        said = break_lock(LocalTransport(), state)
        assert "ended lock holder process" in said and "bob@ws2 (pid 77, run r-bob" in said
        acquire(LocalTransport(), state, ALICE).release()
        assert holder.poll() is None, "break_lock must end the lock shell, not the workstation's process"
    finally:
        holder.kill()
        holder.wait()
    assert break_lock(LocalTransport(), state) == f"local: {state}/lock is not held; nothing to break"


def test_a_holder_on_its_way_out_is_waited_for_and_one_that_stays_is_refused(state):
    # A released lock shell is not waited for (transport/ssh.py), so the next run's may find it still
    # ending: that one is waited for, a second at most; a holder that stays is refused all the same.
    os.makedirs(state)
    leaving = subprocess.Popen(["flock", "-x", f"{state}/lock", "sh", "-c", "echo held; sleep 0.3"],
                               stdout=subprocess.PIPE, text=True)
    assert leaving.stdout is not None and leaving.stdout.readline() == "held\n"
    with acquire(LocalTransport(), state, ALICE) as held:  # before the change: BUSY at once
        assert held.probed == ""
    leaving.wait()
    staying = start_holder(state)
    try:
        started = time.monotonic()
        with pytest.raises(LockError, match="locked by another gpunode run: bob@ws2"):
            acquire(LocalTransport(), state, ALICE)
        assert time.monotonic() - started >= 1.0
    finally:
        staying.kill()
        staying.wait()
