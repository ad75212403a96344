"""`inv teardown` finds what the inventory no longer names (issue 29, Low): venvs under a
venv_root of the inventory's own, model folders staged under an earlier weights_dest_root on a
tmpfs, and the servers' shared-memory leftovers in /dev/shm, which go only when no process maps
or holds them. Run on this machine with the real listing and removal scripts; only what the test
made is handed to the removal."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from gpunode.engine.lock import Owner
from gpunode.fleet import teardown
from gpunode.transport import LocalTransport

SHM = Path("/dev/shm")


@pytest.fixture
def tag():
    name = f"gntest{uuid.uuid4().hex[:8]}"
    made = [SHM / f"torch_{name}", SHM / f"psm_{name}", SHM / f"earlier-{name}"]
    yield name
    subprocess.run(["rm", "-rf", "--", *map(str, made)], check=False)


def test_teardown_finds_and_removes_what_the_inventory_no_longer_names(tmp_path, tag):
    if not os.access(SHM, os.W_OK) or "tmpfs" not in Path("/proc/mounts").read_text():
        pytest.skip("needs a writable tmpfs /dev/shm")
    t = LocalTransport()
    venvs = tmp_path / "venvs"
    (venvs / "sglang-a").mkdir(parents=True)
    (venvs / "sglang-a" / "gpunode-lock.json").write_text("{}")
    (venvs / "users-own").mkdir()                 # no manifest: not gpunode's
    earlier = SHM / f"earlier-{tag}"  # staged while weights_dest_root was /dev/shm; it is another folder now
    earlier.mkdir()
    (earlier / ".gpunode-manifest").write_text("x\n")
    free, held = SHM / f"torch_{tag}", SHM / f"psm_{tag}"
    free.write_bytes(b"\0" * 4096)
    held.write_bytes(b"\0" * 4096)
    holder = subprocess.Popen(["sh", "-c", f'exec 3<"{held}"; echo ready; exec sleep 60'], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"ready\n"
        listed = teardown.plan(t, str(tmp_path / "now"), str(tmp_path / "state"), purge=False,
                               venv_root=str(venvs))
        assert str(venvs / "sglang-a") in [p for _, p in listed.paths]
        assert str(venvs / "users-own") not in [p for _, p in listed.paths]
        assert str(earlier) in [p for _, p in listed.staged]
        segments = [p for _, p in listed.segments]
        assert str(free) in segments and str(held) in segments
        ours = teardown.Removal("local", paths=[r for r in listed.paths if r[1].startswith(str(venvs))],
                                staged=[r for r in listed.staged if tag in r[1]],
                                segments=[r for r in listed.segments if tag in r[1]])
        left = teardown.apply(t, ours, Owner.current("teardown-test"), str(tmp_path / "state"), purge=False)
    finally:
        holder.kill()
        holder.wait()
    assert not (venvs / "sglang-a").exists() and (venvs / "users-own").is_dir() and venvs.is_dir()
    assert not free.exists() and held.exists() and left == [str(held)] and not earlier.exists()
