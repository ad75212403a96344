"""A check that refuses stops the run before anything changes, even when the refusing step
comes late (found by the provision lab test: a model too big for /dev/shm was refused only
after apt, uv and the engine venv had been installed)."""

from __future__ import annotations

from pathlib import Path

from gpunode.engine import RolePlan, run_target
from gpunode.engine.handlers import CommandHandler
from gpunode.steps.files import Directory, File
from tests.unit.engine_helpers import Collect, CountingTransport


def test_a_late_refusal_changes_nothing_and_keeps_pending_handlers(tmp_path: Path):
    state = str(tmp_path / "state")
    fired = tmp_path / "fired"
    mark = CommandHandler("mark", ("sh", "-c", 'echo fired >> "$1"', "sh", str(fired)))
    early = RolePlan("early", [File(str(tmp_path / "early.conf"), "x\n", notify=["mark"])], {"mark": mark})
    run_target(CountingTransport(), [early], state_dir=state)
    Path(state, "handlers.pending").write_text("early\tmark\n")  # as if an earlier run was cut off

    (tmp_path / "blocker").write_text("a file where a folder must go\n")
    roles = [RolePlan("early", [File(str(tmp_path / "early.conf"), "y\n", notify=["mark"])], {"mark": mark}),
             RolePlan("late", [Directory(str(tmp_path / "blocker"))])]
    seen = Collect()
    recap = run_target(CountingTransport(), roles, emit=seen, state_dir=state)

    assert (tmp_path / "early.conf").read_text() == "x\n", "a step applied before the refusal"
    assert fired.read_text() == "fired\n", "a pending handler fired although the run refused"
    assert seen.statuses() == [(f"file:{tmp_path}/early.conf", "skipped"), ("mark", "skipped"),
                               (f"dir:{tmp_path}/blocker", "failed")]
    assert seen.events[0].reason == f"not run: dir:{tmp_path}/blocker refused, so nothing was changed"
    assert seen.events[1].reason.startswith("kept pending for the next run: ")
    assert "exists but is a regular file, not a directory" in seen.events[2].reason
    assert Path(state, "handlers.pending").read_text() == "early\tmark\n"
    assert (recap.changed, recap.failed, recap.skipped, recap.succeeded) == (0, 1, 2, False)
