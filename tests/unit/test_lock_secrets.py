"""The lock never carries a command line's values: lock.owner, the lock shell's argv, the
"locked by" error and break_lock's sentence name who, where, when and the task only."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from gpunode import secrets
from gpunode.engine.lock import Owner, acquire, break_lock, task_of
from gpunode.errors import LockError
from gpunode.transport import LocalTransport

TOKEN = "hf_lockTEST_9f8e7d6c5b4a"
ARGV = ["/work/.venv/bin/inv", "provision", "--host", "kpro6", "--ct", "200", "--set", f"hf_token={TOKEN}"]


def test_the_owner_of_a_run_names_the_task_not_its_arguments():
    assert task_of(ARGV) == "inv provision"
    assert task_of(["inv", "lab.up", "provision", "--set", f"x={TOKEN}"]) == "inv lab.up provision"
    assert task_of(["inv", f"--set=hf_token={TOKEN}"]) == "inv"
    owner = Owner.current("r-1", task=task_of(ARGV))
    assert TOKEN not in owner.to_json()


def _cmdlines_with(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                text = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if marker in text:
                found.append(text.replace("\0", " "))
    return found


def test_lock_owner_is_private_and_neither_it_nor_argv_nor_the_refusal_holds_the_secret(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.argv", ARGV)
    secrets.register(TOKEN)
    state = str(tmp_path / "state")
    owner = Owner.current("r-secret")
    with acquire(LocalTransport(), state, owner):
        record = Path(state, "lock.owner")
        assert stat.S_IMODE(record.stat().st_mode) == 0o600
        text = record.read_text()
        assert TOKEN not in text and '"task":"inv provision"' in text
        shells = _cmdlines_with("gpunode-lock")
        assert any("r-secret" in c for c in shells), shells  # the lock shell is running, found in /proc
        assert not any(TOKEN in c for c in shells)
        with pytest.raises(LockError) as refused:
            acquire(LocalTransport(), state, Owner.current("r-other"))
        assert TOKEN not in str(refused.value) and "inv provision" in str(refused.value)


def test_a_record_from_an_older_gpunode_is_shown_without_its_command_line(tmp_path):
    """Older versions wrote the whole command line; break_lock and the refusal drop its values."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "lock").touch()
    old = {"user": "bob", "workstation": "ws2", "pid": 77, "started": "2026-01-01T00:00:00Z",
           "command": f"/x/bin/inv provision --host lab --set hf_token={TOKEN}", "run_id": "r-old"}
    holder = subprocess.Popen(
        ["sh", "-c", '# gpunode-lock\nexec 9>>"$1/lock"; flock -x 9; printf "%s %s\\n" $$ "$2" > "$1/lock.owner"; '
         'echo LOCKED; read -r _', "sh", str(state), json.dumps(old)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "LOCKED"
        with pytest.raises(LockError) as refused:
            acquire(LocalTransport(), str(state), Owner.current("r-new"))
        assert "bob@ws2 (pid 77, run r-old, since 2026-01-01T00:00:00Z): inv provision" in str(refused.value)
        assert TOKEN not in str(refused.value) and "hf_token" not in str(refused.value)
        said = break_lock(LocalTransport(), str(state))
        assert "ended lock holder process" in said and "): inv provision" in said and TOKEN not in said
    finally:
        holder.kill()
        holder.wait()
