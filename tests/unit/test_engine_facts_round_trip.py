"""Facts in the lock's round trip: a no-op run whose steps depend on the facts is still ONE
command; a run whose plan changed probes again (and records the new batch) before it decides."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpunode.engine import RolePlan, probe, recorded
from gpunode.engine.lock import Owner, acquire
from gpunode.engine.runner import begin, finish
from gpunode.errors import FactError, LockError
from gpunode.steps.files import Directory, File
from tests.unit.engine_helpers import CountingTransport


def prelude(root: Path, seen: list[str]) -> recorded.Prelude:
    """Facts: the text of root/fact, read on the target; the plan writes etc/<fact>.conf."""

    def script(nonce: str) -> str:
        return f"printf '%s fact %s\\n' {nonce} \"$(cat {root}/fact)\"\n"

    def build(output: str, nonce: str) -> list[RolePlan]:
        found = [line.split()[2] for line in output.splitlines() if line.startswith(f"{nonce} fact ")]
        if not found or found[0] == "bad":
            raise FactError("the fact is bad", target="t", hint="fix it")
        seen.append(found[0])
        return [RolePlan("r", [Directory(str(root / "etc")), File(str(root / "etc" / f"{found[0]}.conf"), "x\n")])]

    return recorded.Prelude(recorded.key_for(["r"]), script, build)


def run(root: Path, state: str, *, check: bool = False):
    counted = CountingTransport()
    seen: list[str] = []
    recap = finish(begin(counted, prelude(root, seen), state_dir=state, check=check))
    return recap, counted.commands, seen


def _free(state: str) -> bool:
    try:
        acquire(CountingTransport(), state, Owner.current("second")).release()
    except LockError:
        return False
    return True


def test_a_noop_run_is_one_command_with_facts_lock_and_probes(tmp_path: Path):
    state = str(tmp_path / "state")
    (tmp_path / "fact").write_text("a")
    first, _, _ = run(tmp_path, state)
    assert first.changed == 2 and (tmp_path / "etc" / "a.conf").read_text() == "x\n"
    recap, commands, seen = run(tmp_path, state)
    assert (recap.ok, recap.changed, recap.round_trips, len(commands)) == (2, 0, 1, 1)
    assert seen == ["a"]  # the facts were read again, in that one command
    assert commands[0][2].startswith("# gpunode-lock")
    assert _free(state)


def test_a_changed_fact_changes_the_plan_and_the_run_probes_that_plan(tmp_path: Path):
    state = str(tmp_path / "state")
    (tmp_path / "fact").write_text("a")
    run(tmp_path, state)
    (tmp_path / "fact").write_text("b")
    recap, commands, _ = run(tmp_path, state)
    # lock+facts+old batch, new batch (recorded), the file's write and its journal line
    assert recap.changed == 1 and (tmp_path / "etc" / "b.conf").read_text() == "x\n"
    assert recap.round_trips >= 3
    again, commands, _ = run(tmp_path, state)
    assert (again.changed, again.round_trips) == (0, 1)


def test_a_check_run_without_a_recorded_batch_probes_twice_and_records_nothing(tmp_path: Path):
    state = tmp_path / "state"
    (tmp_path / "fact").write_text("a")
    recap, commands, _ = run(tmp_path, str(state), check=True)
    assert (recap.changed, recap.round_trips) == (2, 2)
    assert not (tmp_path / "etc").exists() and not state.exists()


def test_a_refused_fact_is_raised_before_anything_changes_and_the_lock_is_free(tmp_path: Path):
    state = str(tmp_path / "state")
    (tmp_path / "fact").write_text("bad")
    with pytest.raises(FactError, match="the fact is bad"):
        begin(CountingTransport(), prelude(tmp_path, []), state_dir=state)
    assert not (tmp_path / "etc").exists()
    assert _free(state)


def test_a_held_lock_is_reported_in_the_recap_with_its_holder(tmp_path: Path):
    state = str(tmp_path / "state")
    (tmp_path / "fact").write_text("a")
    with acquire(CountingTransport(), state, Owner.current("other-run", task="inv provision")):
        recap, _, seen = run(tmp_path, state)
    assert "locked by another gpunode run" in recap.error and "other-run" in recap.error
    assert seen == [] and not (tmp_path / "etc").exists()


def test_a_new_target_whose_facts_are_refused_gets_no_state_folder(tmp_path: Path):
    state = tmp_path / "state"
    (tmp_path / "fact").write_text("bad")
    with pytest.raises(FactError):
        begin(CountingTransport(), prelude(tmp_path, []), state_dir=str(state))
    assert not state.exists()  # the lock shell created nothing: the target is as it was
    (tmp_path / "fact").write_text("a")
    recap, _, _ = run(tmp_path, str(state))
    assert recap.changed == 2 and (state / "lock").exists()


def test_the_recorded_batch_runs_beside_the_facts_and_its_output_follows_them(tmp_path: Path):
    # The facts wait for a line that only the recorded batch writes (through a fifo): one after
    # the other, the facts would give up after 10 s and print "none". Side by side they get it.
    state, fifo = tmp_path / "state", tmp_path / "fifo"
    state.mkdir()
    os.mkfifo(fifo)
    key = recorded.key_for(["r"])
    batch = f"printf '%s begin 0\\n' \"$GN\"\ntimeout 10 sh -c 'echo from-batch > {fifo}'\n" \
            "printf '\\n%s end 0 %d\\n' \"$GN\" $?\n"
    (state / f"probe-{key}.sh").write_text(f"# gpunode-probe {'0' * 64}\n{batch}")

    def script(nonce: str) -> str:
        return f"printf '%s fact %s\\n' {nonce} \"$(timeout 10 sh -c 'read x < {fifo} && echo $x' || echo none)\"\n"

    nonce = probe.new_nonce()
    text = recorded.first_trip(recorded.Prelude(key, script, lambda *_: []), nonce)
    held = acquire(CountingTransport(), str(state), Owner.current("side-by-side"), probe=text)
    held.release()
    assert f"{nonce} fact from-batch\n" in held.probed
    assert held.probed.index(" fact ") < held.probed.index(f"{nonce} recorded {'0' * 64}")
    assert probe.parse(held.probed, 1, nonce)[0] == probe.Probe(0, "")


def converging_prelude(root: Path, seen: list[str]) -> recorded.Prelude:
    """Facts: whether root/etc exists. Its Directory step is planned only while it does not, so
    the run that makes it leaves facts, and a plan, that differ from the ones it probed with."""

    def script(nonce: str) -> str:
        return f"if [ -d {root}/etc ]; then echo {nonce} present; else echo {nonce} absent; fi\n"

    def build(output: str, nonce: str) -> list[RolePlan]:
        fact = "present" if f"{nonce} present" in output else "absent"
        seen.append(fact)
        if fact == "present" and (root / "refuse-present").exists():
            raise FactError("present is refused", target="t", hint="remove refuse-present")
        conf = File(str(root / "etc" / "x.conf"), "x\n")
        return [RolePlan("r", [conf] if fact == "present" else [Directory(str(root / "etc")), conf])]

    return recorded.Prelude(recorded.key_for(["r"]), script, build)


def test_the_run_after_one_that_changed_the_facts_is_still_one_command(tmp_path: Path):
    state = str(tmp_path / "state")
    seen: list[str] = []
    cold = finish(begin(CountingTransport(), converging_prelude(tmp_path, seen), state_dir=state))
    assert (cold.changed, cold.error) == (2, "")
    # The facts were read again once the run had changed the target, and that plan's batch recorded.
    assert seen == ["absent", "present"]
    counted = CountingTransport()
    again = finish(begin(counted, converging_prelude(tmp_path, seen), state_dir=state))
    assert (again.changed, again.ok, again.round_trips, len(counted.commands)) == (0, 1, 1, 1)
    assert _free(state)


def test_facts_refused_after_the_change_fail_nothing_and_the_next_run_probes_twice(tmp_path: Path):
    state = str(tmp_path / "state")
    (tmp_path / "refuse-present").write_text("")
    seen: list[str] = []
    cold = finish(begin(CountingTransport(), converging_prelude(tmp_path, seen), state_dir=state))
    assert (cold.changed, cold.failed, cold.error) == (2, 0, "")
    assert seen == ["absent", "present"] and _free(state)
    (tmp_path / "refuse-present").unlink()
    again = finish(begin(CountingTransport(), converging_prelude(tmp_path, seen), state_dir=state))
    assert (again.changed, again.round_trips) == (0, 2)  # the batch recorded is still the cold run's


def test_a_change_that_leaves_the_facts_as_they_were_records_nothing_again(tmp_path: Path):
    state = str(tmp_path / "state")
    (tmp_path / "fact").write_text("a")
    counted, seen = CountingTransport(), []
    cold = finish(begin(counted, prelude(tmp_path, seen), state_dir=state))
    assert cold.changed == 2 and seen == ["a", "a"]  # the facts were read again at the end...
    stores = [c for c in counted.commands if c[:3] == ["sh", "-c", recorded._STORE]]
    assert stores == []  # ...and made the batch that this run recorded: nothing to store
    again = finish(begin(CountingTransport(), prelude(tmp_path, seen), state_dir=state))
    assert (again.changed, again.round_trips) == (0, 1)


def test_a_run_that_only_rewrites_a_file_does_not_read_the_facts_again(tmp_path: Path):
    state = str(tmp_path / "state")
    (tmp_path / "fact").write_text("a")
    run(tmp_path, state)
    (tmp_path / "etc" / "a.conf").write_text("drifted\n")
    recap, commands, seen = run(tmp_path, state)
    # lock+facts+batch, the file's write, its journal line: no facts at the end (File.changes_facts)
    assert (recap.changed, seen, len(commands)) == (1, ["a"], 3)
    again, _, _ = run(tmp_path, state)
    assert (again.changed, again.round_trips) == (0, 1)
