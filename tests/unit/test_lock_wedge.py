"""Nothing a run starts on a target outlives it or keeps the lock (issue 29, the wedge).

A probe that hangs is ended at its deadline with everything it started; a process a probe left
behind never holds the lock; a run's commands end when its lock shell's stdin closes; `break_lock`
ends whatever holds the lock and names it. All on this machine, with the real lock shell.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from gpunode.engine.lock import Fenced, Owner, acquire, break_lock
from gpunode.errors import CommandError, LockError
from gpunode.transport import LocalTransport

ALICE = Owner(user="alice", workstation="ws1", pid=4242, started="2026-01-02T03:04:05Z",
              task="inv provision", run_id="r-alice")


@pytest.fixture
def state(tmp_path: Path) -> str:
    return str(tmp_path / "state")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)  # polling /proc, bounded by the deadline
    return True


def in_thread(fn, seconds: float):
    """fn() in a thread: (returned, raised), or AssertionError when it has not ended within `seconds`."""
    box: dict = {}

    def go() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s"
    return box.get("value"), box.get("error")


def read_pid(path: Path, seconds: float = 10) -> int:
    deadline = time.monotonic() + seconds
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.02)  # waiting for the probe to start, bounded
    return int(path.read_text())


def test_a_hanging_probe_is_ended_at_its_deadline_with_what_it_started_and_the_lock_is_free(
        state, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUNODE_PROBE_DEADLINE", "2")
    pidfile = tmp_path / "child"
    # What a find -L into /dev or a hung mount looks like: a child that never ends.
    probe = f"echo begin; sh -c 'echo $$ > {pidfile}; exec sleep 1000'"
    started = time.monotonic()
    _, error = in_thread(lambda: acquire(LocalTransport(), state, ALICE, probe=probe), 30)
    took = time.monotonic() - started
    child = read_pid(pidfile)
    try:
        assert isinstance(error, CommandError), error
        assert "did not answer within 2 s" in str(error) and "let go of the lock" in str(error)
        assert error.target == "local"
        assert "begin" in error.evidence  # what it had said so far
        assert took < 15, took
        assert gone_within(child, 10), "the probe's child outlived its deadline"
        acquire(LocalTransport(), state, ALICE).release()  # free at once, no holder left
    finally:
        if alive(child):
            os.kill(child, 9)


def test_a_process_a_probe_left_behind_never_holds_the_lock(state, tmp_path):
    pidfile = tmp_path / "child"
    probe = f"sh -c 'echo $$ > {pidfile}; exec sleep 1000' >/dev/null 2>&1 &"
    acquire(LocalTransport(), state, ALICE, probe=probe).release()
    child = read_pid(pidfile)
    try:
        assert alive(child)
        # Before: the child had inherited the lock shell's descriptor 9, and the lock stayed taken.
        later, error = in_thread(lambda: acquire(LocalTransport(), state, ALICE), 20)
        assert error is None, error
        later.release()
    finally:
        os.kill(child, 9)


def test_a_runs_command_ends_when_its_lock_shell_lets_go(state, tmp_path):
    pidfile = tmp_path / "installer"
    held = acquire(LocalTransport(), state, ALICE)
    fenced = Fenced(LocalTransport(), state)
    # An installer and a child of its own, as uv's build of a package would be.
    script = f"sleep 1000 & echo $! > {pidfile}; wait"
    ran = {}
    worker = threading.Thread(target=lambda: ran.update(r=fenced.run(["sh", "-c", script])), daemon=True)
    worker.start()
    grandchild = read_pid(pidfile)
    try:
        assert alive(grandchild)
        held.release()  # the controller goes: its connection, and so the lock shell's stdin, closes
        assert gone_within(grandchild, 10), "the run's command outlived its lock"
        worker.join(10)
        # Its exit code is not asserted: `wait` returns 0 once its child is gone, and on a loaded machine
        # the shells may finish between the kills, the deepest first.
        assert not worker.is_alive() and "r" in ran
        assert os.listdir(f"{state}/run") == []
        acquire(LocalTransport(), state, ALICE).release()
    finally:
        if alive(grandchild):
            os.kill(grandchild, 9)


def test_break_lock_ends_whatever_holds_the_lock_and_names_it(state):
    os.makedirs(state)
    # Not a gpunode lock shell: before, break_lock refused ("its holder is not a gpunode lock shell").
    holder = subprocess.Popen(["flock", "-x", f"{state}/lock", "sh", "-c", "echo held; exec sleep 1000"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(LockError, match="a check run or a run that left no owner record"):
            acquire(LocalTransport(), state, ALICE)
        said = break_lock(LocalTransport(), state)
        assert said.startswith(f"local: ended lock holder process {holder.pid} (flock)"), said
        assert "(sleep)" in said and said.endswith("the lock is free")
        holder.wait(10)
        acquire(LocalTransport(), state, ALICE).release()
    finally:
        holder.kill()
        holder.wait()
