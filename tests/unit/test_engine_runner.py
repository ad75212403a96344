"""The runner against real temp folders through LocalTransport: check mode, convergence,
re-probes, handler persistence across failures, and what a no-op re-run costs."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from gpunode.engine import RolePlan, recorded, run_target, run_targets
from gpunode.engine.handlers import CommandHandler
from gpunode.engine.journal import read as read_journal
from gpunode.engine.lock import Owner, acquire
from gpunode.engine.runner import begin, finish
from gpunode.report import JsonLines
from gpunode.steps.files import Directory, File, Symlink
from tests.unit.engine_helpers import Collect, CountingTransport, snapshot


def marker_handler(path: Path, name: str = "mark") -> CommandHandler:
    """A handler whose every run appends a line to `path`, so tests can count runs."""
    return CommandHandler(name, ("sh", "-c", 'echo fired >> "$1"', "sh", str(path)))


def demo_role(root: Path, *, content: str = "port=8099\n") -> RolePlan:
    return RolePlan(
        "demo",
        [
            Directory(str(root / "etc"), mode=0o750),
            File(str(root / "etc/demo.conf"), content, notify=["mark"]),
            Symlink(str(root / "current"), str(root / "etc/demo.conf")),
        ],
        {"mark": marker_handler(root / "fired")},
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "t").mkdir()
    return tmp_path / "t"


@pytest.fixture
def state(tmp_path: Path) -> str:
    return str(tmp_path / "state")


def test_check_mode_plans_everything_with_diffs_and_writes_nothing(root, state, tmp_path):
    before = snapshot(tmp_path)
    seen = Collect()
    recap = run_target(CountingTransport(), [demo_role(root)], check=True, emit=seen, state_dir=state)
    assert snapshot(tmp_path) == before, "check mode wrote something"
    assert seen.statuses() == [
        (f"dir:{root}/etc", "changed"),
        (f"file:{root}/etc/demo.conf", "changed"),
        (f"link:{root}/current", "changed"),
        ("mark", "changed"),
    ]
    assert all(e.check for e in seen.events)
    diff = seen.by_step()[f"file:{root}/etc/demo.conf"].diff
    assert "+port=8099" in diff
    assert seen.by_step()["mark"].reason == f"would run (notified by file:{root}/etc/demo.conf)"
    assert (recap.changed, recap.ok, recap.failed, recap.check) == (4, 0, 0, True)


def test_apply_converges_and_the_second_run_changes_nothing(root, state):
    first = Collect()
    recap1 = run_target(CountingTransport(), [demo_role(root)], emit=first, state_dir=state)
    assert recap1.succeeded and recap1.changed == 4
    assert (root / "etc/demo.conf").read_text() == "port=8099\n"
    assert (root / "etc").stat().st_mode & 0o777 == 0o750
    assert (root / "current").readlink() == root / "etc/demo.conf"
    assert (root / "fired").read_text() == "fired\n"
    assert first.by_step()[f"file:{root}/etc/demo.conf"].diff == "", "diffs are shown only with diff=True"

    second = Collect()
    recap2 = run_target(CountingTransport(), [demo_role(root)], emit=second, state_dir=state)
    assert (recap2.changed, recap2.ok) == (0, 3)
    assert second.by_step()[f"file:{root}/etc/demo.conf"].reason.startswith(
        f"{root}/etc/demo.conf already has the desired content (sha256 ")
    assert (root / "fired").read_text() == "fired\n", "the handler fired although nothing changed"


def test_journal_records_each_applied_step_and_handler(root, state):
    recap = run_target(CountingTransport(), [demo_role(root)], state_dir=state)
    lines = read_journal(CountingTransport(), state)
    assert [(x["kind"], x["step"]) for x in lines] == [
        ("step", f"dir:{root}/etc"), ("step", f"file:{root}/etc/demo.conf"),
        ("step", f"link:{root}/current"), ("handler", "mark")]
    assert {x["run"] for x in lines} == {lines[0]["run"]}
    assert lines[1]["summary"].startswith(f"create {root}/etc/demo.conf (10 bytes")
    assert recap.succeeded


def test_a_noop_rerun_costs_one_round_trip_whatever_the_number_of_steps(root, state):
    def role(n: int) -> RolePlan:
        return RolePlan("many", [File(str(root / f"f{i}"), f"{i}\n") for i in range(n)])

    costs = {}
    for n in (3, 60):
        run_target(CountingTransport(), [role(n)], state_dir=state)
        counted = CountingTransport()
        recap = run_target(counted, [role(n)], state_dir=state)
        assert recap.ok == n and recap.changed == 0
        assert recap.round_trips == len(counted.commands)
        costs[n] = len(counted.commands)
    assert costs == {3: 1, 60: 1}  # the lock shell, which ran the batched probe


def test_diff_mode_shows_the_old_and_new_content_on_apply(root, state):
    run_target(CountingTransport(), [demo_role(root)], state_dir=state)
    seen = Collect()
    run_target(CountingTransport(), [demo_role(root, content="port=9000\n")], diff=True, emit=seen,
               state_dir=state)
    event = seen.by_step()[f"file:{root}/etc/demo.conf"]
    assert event.status == "changed"
    assert "-port=8099\n+port=9000\n" in event.diff
    assert (root / "fired").read_text() == "fired\n" * 2


def test_a_step_made_redundant_by_an_earlier_one_is_reprobed_and_skipped(root, state):
    # mkdir -p of a/b creates a with mode 0755 (umask 022) as a side effect.
    role = RolePlan("dirs", [Directory(str(root / "a/b")), Directory(str(root / "a"), mode=0o755)])
    seen = Collect()
    recap = run_target(CountingTransport(), [role], emit=seen, state_dir=state)
    assert seen.statuses() == [(f"dir:{root}/a/b", "changed"), (f"dir:{root}/a", "ok")]
    assert seen.events[1].reason == f"{root}/a is already a directory with mode 0755"
    assert recap.changed == 1


def test_a_failure_skips_the_rest_and_keeps_the_notified_handler_for_the_next_run(root, state):
    blocker = root / "blocker"
    blocker.write_text("a file where a folder is needed\n")
    fired = root / "fired"
    role = RolePlan(
        "svc",
        [
            File(str(root / "svc.conf"), "a=1\n", notify=["mark"]),
            File(str(blocker / "inner.conf"), "b=2\n"),
            File(str(root / "after.conf"), "c=3\n"),
        ],
        {"mark": marker_handler(fired)},
    )
    seen = Collect()
    recap = run_target(CountingTransport(), [role], emit=seen, state_dir=state)
    assert seen.statuses() == [
        (f"file:{root}/svc.conf", "changed"),
        (f"file:{blocker}/inner.conf", "failed"),
        (f"file:{root}/after.conf", "skipped"),
        ("mark", "skipped"),
    ]
    assert "writing " + str(blocker / "inner.conf") in seen.events[1].reason
    assert not fired.exists()
    assert Path(state, "handlers.pending").read_text() == "svc\tmark\n"
    assert (recap.changed, recap.failed, recap.skipped, recap.succeeded) == (1, 1, 2, False)

    blocker.unlink()
    seen = Collect()
    recap = run_target(CountingTransport(), [role], emit=seen, state_dir=state)
    assert seen.statuses()[0] == (f"file:{root}/svc.conf", "ok")
    assert seen.by_step()["mark"].status == "changed"
    assert seen.by_step()["mark"].reason == "ran (pending from an earlier run)"
    assert fired.read_text() == "fired\n"
    assert not Path(state, "handlers.pending").exists()
    assert recap.succeeded

    run_target(CountingTransport(), [role], state_dir=state)
    assert fired.read_text() == "fired\n", "a handler fired twice for one change"


def test_a_failing_handler_stays_pending_and_is_retried(root, state):
    gate = root / "gate"
    flaky = CommandHandler("mark", ("sh", "-c", 'test -e "$1" && echo ok >> "$2"', "sh", str(gate),
                                    str(root / "fired")))
    role = RolePlan("r", [File(str(root / "x.conf"), "x\n", notify=["mark"])], {"mark": flaky})
    seen = Collect()
    recap = run_target(CountingTransport(), [role], emit=seen, state_dir=state)
    assert seen.by_step()["mark"].status == "failed"
    assert "handler mark failed (exit code 1)" in seen.by_step()["mark"].reason
    assert not recap.succeeded
    assert Path(state, "handlers.pending").read_text() == "r\tmark\n"

    gate.touch()
    recap = run_target(CountingTransport(), [role], state_dir=state)
    assert recap.succeeded and (root / "fired").read_text() == "ok\n"
    assert not Path(state, "handlers.pending").exists()


def test_a_handler_notified_by_several_steps_fires_once_after_the_role(root, state):
    role = RolePlan("r", [File(str(root / f"{i}.conf"), f"{i}\n", notify=["mark"]) for i in range(3)],
                    {"mark": marker_handler(root / "fired")})
    seen = Collect()
    run_target(CountingTransport(), [role], emit=seen, state_dir=state)
    assert (root / "fired").read_text() == "fired\n"
    assert seen.events[-1].step == "mark"
    assert seen.events[-1].reason == "ran (notified by " + ", ".join(
        f"file:{root}/{i}.conf" for i in range(3)) + ")"


def test_json_lines_match_the_documented_schema(root, state):
    out = io.StringIO()
    sink = JsonLines(out, run_id="20261203-094713-1a2b3c")
    recap = run_target(CountingTransport("box"), [demo_role(root)], emit=sink, state_dir=state)
    sink.finish([recap])
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    step_keys = {"v", "type", "ts", "run", "target", "role", "step", "status", "reason", "duration", "check"}
    assert [x["type"] for x in lines] == ["start", "step", "step", "step", "handler", "target", "recap"]
    assert lines[0]["steps"] == 3 and lines[0]["roles"] == ["demo"]
    for line in lines[1:5]:
        assert set(line) == step_keys and line["v"] == 1 and line["target"] == "box"
    assert {x["run"] for x in lines} == {"20261203-094713-1a2b3c"}
    assert lines[5]["round_trips"] == recap.round_trips and lines[5]["error"] == ""
    assert lines[6]["succeeded"] is True and lines[6]["changed"] == 4
    assert lines[6]["targets"][0]["target"] == "box"


def test_targets_run_in_parallel_and_wait_for_each_others_lock(tmp_path, state):
    # Both "targets" are this machine, so they share the lock: the second waits for the first.
    jobs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        jobs.append((CountingTransport(name), [demo_role(tmp_path / name)]))
    seen = Collect()
    recaps = run_targets(jobs, forks=2, emit=seen, state_dir=state, lock_wait=30)
    assert [r.target for r in recaps] == ["a", "b"]
    assert all(r.succeeded and r.changed == 4 for r in recaps)
    assert sorted(r.target for r in seen.recaps) == ["a", "b"]
    assert (tmp_path / "a/etc/demo.conf").exists() and (tmp_path / "b/etc/demo.conf").exists()


def test_a_run_that_lost_its_lock_stops_before_the_next_change(root, state):
    from gpunode.engine.lock import break_lock

    role = RolePlan("r", [File(str(root / f"{i}.conf"), f"{i}\n") for i in range(3)])
    seen = Collect()

    def emit(item) -> None:
        seen(item)
        if getattr(item, "status", "") == "changed" and len(seen.events) == 1:
            break_lock(CountingTransport(), state)  # as if the connection holding the lock had died

    run_target(CountingTransport(), [role], emit=emit, state_dir=state)
    assert seen.statuses() == [(f"file:{root}/0.conf", "changed"), (f"file:{root}/1.conf", "failed"),
                               (f"file:{root}/2.conf", "skipped")]
    assert "this run lost the lock" in seen.events[1].reason
    assert not (root / "1.conf").exists()
    again = run_target(CountingTransport(), [role], state_dir=state)
    assert (again.ok, again.changed) == (1, 2)


def _said(collect: Collect, root: Path) -> list[str]:
    """What a run told its user, its own folder written ROOT."""
    starts = [(s.target, s.roles, s.steps, s.check) for s in collect.others]
    events = [(e.kind, e.role, e.step, e.status, e.reason, e.diff, e.commands) for e in collect.events]
    recaps = [(r.ok, r.changed, r.failed, r.skipped, r.unreachable, r.error) for r in collect.recaps]
    return [repr(x).replace(str(root), "ROOT") for x in (starts, events, recaps)]


@pytest.mark.parametrize("check", [True, False])
def test_roles_given_and_roles_from_the_facts_run_the_same_path(tmp_path: Path, check: bool):
    """run_target (roles given) and begin/finish (roles built from the facts) say the same, step
    for step, on a first run and on the no-op after it; a held lock is the same error in both."""
    said: dict[str, list] = {}
    for way in ("given", "facts"):
        root = tmp_path / way
        (root / "t").mkdir(parents=True)
        state = str(root / "state")
        roles = [demo_role(root / "t")]
        prelude = recorded.Prelude(recorded.key_for(["demo"]), lambda nonce: "", lambda out, nonce, roles=roles: roles)
        said[way] = []
        for _ in range(2):
            collect = Collect()
            if way == "given":
                run_target(CountingTransport(), roles, state_dir=state, check=check, emit=collect)
            else:
                finish(begin(CountingTransport(), prelude, state_dir=state, check=check, emit=collect))
            said[way] += _said(collect, root)
        # Another run holds the lock: roles built from the facts are not known then (no facts were
        # read), so only the error is the same.
        held = acquire(CountingTransport(), state, Owner.current("other"))
        try:
            collect = Collect()
            if way == "given":
                run_target(CountingTransport(), roles, state_dir=state, check=False, emit=collect)
            else:
                finish(begin(CountingTransport(), prelude, state_dir=state, check=False, emit=collect))
        finally:
            held.release()
        said[way].append(repr([r.error.split(" (pid")[0] for r in collect.recaps]))
    assert said["given"] == said["facts"]
    assert "locked by another gpunode run" in said["given"][-1]
