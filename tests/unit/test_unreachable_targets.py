"""A target that cannot be reached does not stop the others (issue 30): the run goes on, the
recap says UNREACHABLE, the exit code is Ansible's 4. The dead target is a real SSH connection
to a loopback port nothing listens on; the live one converges real temp folders."""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from gpunode import pipeline
from gpunode.cli.provision import exit_code
from gpunode.engine import RolePlan, recorded
from gpunode.engine.events import TargetRecap
from gpunode.report import HumanReport, JsonLines
from gpunode.steps.files import Directory, File
from gpunode.transport import SshSettings, SshTransport
from tests.unit.engine_helpers import CountingTransport


def closed_port() -> int:
    """A loopback port that refuses connections: bound, then closed, so nothing listens there."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def planner(root: Path) -> SimpleNamespace:
    """What provision_live needs of a Planner: a prelude whose plan writes root/etc/x.conf."""
    def build(output: str, nonce: str) -> list[RolePlan]:
        return [RolePlan("r", [Directory(str(root / "etc")), File(str(root / "etc" / "x.conf"), "x\n")])]

    prelude = recorded.Prelude(recorded.key_for(["r"]), lambda nonce: "", build)
    return SimpleNamespace(prelude=prelude, plan=None, target=SimpleNamespace(name="local"))


def run(tmp_path: Path, check: bool):
    dead = SshTransport(SshSettings(name="dead", address="127.0.0.1", port=closed_port(),
                                    known_hosts=(str(tmp_path / "known_hosts"),), connect_timeout=5.0))
    out = io.StringIO()
    sink = JsonLines(out, run_id="r1")
    pairs = [(planner(tmp_path), dead), (planner(tmp_path), CountingTransport())]
    recaps = pipeline.provision_live(pairs, check=check, emit=sink, forks=2,  # type: ignore[arg-type]
                                     state_dir=str(tmp_path / "state"))
    sink.finish(recaps)
    return recaps, [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_dead_host_is_unreachable_and_the_other_target_converges(tmp_path: Path):
    recaps, lines = run(tmp_path, check=False)
    dead, live = recaps
    assert (tmp_path / "etc" / "x.conf").read_text() == "x\n", "the reachable target was not provisioned"
    assert live.succeeded and live.changed == 2 and not live.unreachable
    assert dead.unreachable and not dead.succeeded
    assert "cannot reach root@127.0.0.1:" in dead.error and "Connection refused" in dead.error
    assert exit_code(recaps) == 4
    recap = lines[-1]
    assert recap["type"] == "recap" and recap["unreachable"] == 1 and recap["succeeded"] is False
    assert [(t["target"], t["unreachable"]) for t in recap["targets"]] == [("dead", True), ("local", False)]
    dead_lines = [line["type"] for line in lines if line.get("target") == "dead"]
    assert dead_lines == ["start", "target"]


def test_check_mode_plans_the_reachable_target_and_changes_nothing(tmp_path: Path):
    recaps, lines = run(tmp_path, check=True)
    assert not (tmp_path / "etc").exists()
    assert [(r.target, r.unreachable, r.changed) for r in recaps] == [("dead", True, 0), ("local", False, 2)]
    assert exit_code(recaps) == 4


def test_the_exit_code_follows_ansible_playbook():
    ok, failed = TargetRecap("a", ok=1), TargetRecap("b", failed=1)
    locked, lost = TargetRecap("c", error="locked by another run"), TargetRecap("d", error="x", unreachable=True)
    assert [exit_code(r) for r in ([ok], [ok, failed], [ok, locked], [failed, lost], [lost])] == [0, 2, 2, 4, 4]


def test_the_human_recap_says_unreachable():
    out = io.StringIO()
    report = HumanReport(Console(file=out, width=160, color_system=None))
    recaps = [TargetRecap("kpro6/200", ok=3), TargetRecap("kpro6/202", error="container 202 is not running",
                                                          unreachable=True)]
    for r in recaps:
        report(r)
    report.finish(recaps)
    rows = {line.split("│")[1].strip(): line.split("│")[-2].strip()
            for line in out.getvalue().splitlines() if line.startswith("│ kpro6")}
    assert rows == {"kpro6/200": "ok", "kpro6/202": "UNREACHABLE"}
    assert "kpro6/202: container 202 is not running" in out.getvalue()


def refusing_planner() -> SimpleNamespace:
    """A target whose facts are refused, as pipeline.check_model refuses a missing model folder."""
    from gpunode.errors import FactError

    def build(output: str, nonce: str) -> list[RolePlan]:
        raise FactError("model folder /mnt/models/m does not exist on lab/201", target="lab/201",
                        hint="check model_source in the inventory")

    prelude = recorded.Prelude(recorded.key_for(["r"]), lambda nonce: "", build)
    return SimpleNamespace(prelude=prelude, plan=None, target=SimpleNamespace(name="lab/201"))


def test_a_target_refused_at_its_facts_is_in_the_recap_and_the_others_go_on(tmp_path: Path):
    """One container's model folder missing once stopped every target (exit 2, no --json output at
    all), even in --check; now it is that target's recap, as an unreachable one is."""
    for check in (True, False):
        out = io.StringIO()
        sink = JsonLines(out, run_id="r1")
        root = tmp_path / ("check" if check else "apply")
        pairs = [(refusing_planner(), CountingTransport()), (planner(root), CountingTransport())]
        # forks=1: both targets are this machine, with one lock folder (the refused one releases it first)
        recaps = pipeline.provision_live(pairs, check=check, emit=sink, forks=1,  # type: ignore[arg-type]
                                         state_dir=str(root / "state"))
        sink.finish(recaps)
        refused, live = recaps
        assert (refused.target, refused.unreachable, refused.succeeded) == ("lab/201", False, False)
        assert "model folder /mnt/models/m does not exist" in refused.error
        assert "hint: check model_source" in refused.error
        assert live.succeeded and live.changed == 2
        assert (root / "etc" / "x.conf").exists() is not check
        assert exit_code(recaps) == 2
        lines = [json.loads(line) for line in out.getvalue().splitlines()]
        assert [line["type"] for line in lines if line.get("target") == "lab/201"] == ["start", "target"]
        assert lines[-1]["type"] == "recap" and lines[-1]["check"] is check and lines[-1]["failed"] == 0
        assert [t["target"] for t in lines[-1]["targets"]] == ["lab/201", "local"]
