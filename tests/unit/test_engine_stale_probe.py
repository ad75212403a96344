"""Roles after a change are probed again, however many unchanged roles lie in between.

Found by the provision lab test: a launch-argument change restarted the servers (servers
role), the services role re-probed and changed nothing, and the ready role then trusted the
run's first probe ("all endpoints answer") although the servers were still loading.
"""

from __future__ import annotations

from pathlib import Path

from gpunode.engine import RolePlan, run_target
from gpunode.engine.handlers import CommandHandler
from gpunode.steps.files import File
from tests.unit.engine_helpers import Collect, CountingTransport


def test_a_handler_that_undoes_a_later_roles_noop_is_seen_two_roles_later(tmp_path: Path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    b.write_text("b\n")
    c.write_text("c\n")  # in place when the run starts: the first probe finds nothing to do
    clobber = CommandHandler("clobber", ("sh", "-c", 'echo old > "$1"', "sh", str(c)))
    roles = [
        RolePlan("first", [File(str(a), "a\n", notify=["clobber"])], {"clobber": clobber}),
        RolePlan("between", [File(str(b), "b\n")]),
        RolePlan("last", [File(str(c), "c\n")]),
    ]
    seen = Collect()
    recap = run_target(CountingTransport(), roles, emit=seen, state_dir=str(tmp_path / "state"))
    assert recap.succeeded
    assert seen.statuses() == [(f"file:{a}", "changed"), ("clobber", "changed"), (f"file:{b}", "ok"),
                               (f"file:{c}", "changed")]
    assert c.read_text() == "c\n"


def test_a_noop_run_still_costs_one_round_trip(tmp_path: Path):
    roles = [RolePlan(name, [File(str(tmp_path / name), f"{name}\n")]) for name in ("x", "y", "z")]
    run_target(CountingTransport(), roles, state_dir=str(tmp_path / "state"))
    again = run_target(CountingTransport(), roles, state_dir=str(tmp_path / "state"))
    assert (again.changed, again.ok, again.round_trips) == (0, 3, 1)
