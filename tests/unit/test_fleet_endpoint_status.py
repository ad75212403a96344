"""`inv status` on a fleet router's target, from the whole recorded output of its script on the lab's
router container (tests/data/fleet/endpoint/README.md): the router's view of every worker, named
by target and server, and a lost worker reported as down."""

from __future__ import annotations

from pathlib import Path

from gpunode.fleet import render
from gpunode.fleet.status import parse

DATA = Path(__file__).resolve().parents[1] / "data" / "fleet" / "endpoint"


def report(name: str):
    return parse("lab/223", (DATA / name).read_text())


def test_the_fleet_routers_workers_named_by_target_and_server():
    r = report("status-gather-fleet-router.txt")
    (unit,) = r.units
    assert (unit.kind, unit.name, unit.active, unit.port, unit.health) == \
        ("fleet-router", "fleet-router", "active", 30100, "200")
    assert [(w.server, w.url, w.healthy) for w in r.fleet_workers] == [
        ("lab/221 cpu0", "http://10.231.0.21:30001", True), ("lab/222 cpu0", "http://10.231.0.22:30001", True)]
    assert r.down() == [] and r.to_dict()["up"] is True
    lines = render.status_lines(r)
    assert lines[0] == "lab/223: 0 server(s), fleet router: all up"
    assert "  fleet router workers (2 of 2):" in lines


def test_a_lost_worker_is_down_by_target_and_server():
    r = report("status-gather-fleet-router-lost.txt")
    assert r.down() == ["fleet-router: worker lab/222 cpu0 (http://10.231.0.22:30001) unhealthy"]
    assert any("UNHEALTHY" in line and "lab/222 cpu0" in line for line in render.status_lines(r))


def test_a_worker_the_router_does_not_list_is_down():
    r = report("status-gather-fleet-router.txt")
    r.fleet_workers = [w for w in r.fleet_workers if w.url != "http://10.231.0.22:30001"]
    assert r.down() == ["fleet-router: lab/222 cpu0 (http://10.231.0.22:30001) is not one of its workers"]
