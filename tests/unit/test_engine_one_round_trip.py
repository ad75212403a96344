"""A no-op run is one round trip: the lock shell runs every step's probe and reads the pending
handlers under the lock, and lets the lock go at once when nothing is to be applied."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.engine import RolePlan, run_target
from gpunode.engine.events import Event
from gpunode.engine.lock import Owner, acquire
from gpunode.errors import LockError
from gpunode.steps.files import Directory, File, Symlink
from tests.unit.engine_helpers import CountingTransport


def _role(root: Path) -> RolePlan:
    return RolePlan("r", [Directory(str(root / "etc")), File(str(root / "etc" / "a.conf"), "a\n"),
                          Symlink(str(root / "current"), str(root / "etc"))])


def _lock_state(state: str) -> str:
    """What a second applying run gets when it asks for the lock right now."""
    try:
        acquire(CountingTransport(), state, Owner.current("second")).release()
    except LockError:
        return "busy"
    return "free"


@pytest.mark.parametrize("check", [False, True])
def test_the_one_command_of_a_noop_run_is_the_lock_shell_with_every_probe(tmp_path: Path, check: bool):
    state = str(tmp_path / "state")
    run_target(CountingTransport(), [_role(tmp_path)], state_dir=state)
    counted = CountingTransport()
    recap = run_target(counted, [_role(tmp_path)], state_dir=state, check=check)
    assert (recap.ok, recap.changed, recap.failed, recap.round_trips) == (3, 0, 0, 1)
    [argv] = counted.commands
    assert argv[:2] == ["sh", "-c"] and argv[2].startswith("# gpunode-lock")
    batch = argv[6]  # sh -c LOCK sh STATE OWNER PROBE FRESH END
    for path in (tmp_path / "etc", tmp_path / "etc" / "a.conf", tmp_path / "current"):
        assert str(path) in batch
    assert "handlers.pending" in batch


def test_a_noop_run_lets_the_lock_go_before_it_reports(tmp_path: Path):
    state = str(tmp_path / "state")
    run_target(CountingTransport(), [_role(tmp_path)], state_dir=state)
    seen: list[str] = []

    def emit(item) -> None:
        if isinstance(item, Event):
            seen.append(_lock_state(state))

    recap = run_target(CountingTransport(), [_role(tmp_path)], state_dir=state, emit=emit)
    assert recap.changed == 0 and seen == ["free", "free", "free"]


def test_a_run_that_changes_something_holds_the_lock_while_it_applies(tmp_path: Path):
    state = str(tmp_path / "state")
    seen: list[tuple[str, str]] = []

    def emit(item) -> None:
        if isinstance(item, Event):
            seen.append((item.status, _lock_state(state)))

    recap = run_target(CountingTransport(), [_role(tmp_path)], state_dir=state, emit=emit)
    assert recap.changed == 3 and seen == [("changed", "busy")] * 3
    assert _lock_state(state) == "free"


def test_pending_handlers_keep_the_lock_and_fire_though_no_step_changes(tmp_path: Path):
    state = tmp_path / "state"
    run_target(CountingTransport(), [_role(tmp_path)], state_dir=str(state))
    (state / "handlers.pending").write_text("r\tmark\n")
    marker = tmp_path / "marked"
    from gpunode.engine.handlers import CommandHandler

    role = _role(tmp_path)
    role.handlers["mark"] = CommandHandler("mark", ("touch", str(marker)))
    held: list[str] = []

    def emit(item) -> None:
        if isinstance(item, Event) and item.kind == "handler":
            held.append(_lock_state(str(state)))

    recap = run_target(CountingTransport(), [role], state_dir=str(state), emit=emit)
    assert recap.succeeded and marker.exists() and held == ["busy"]
    assert not (state / "handlers.pending").exists()
