"""What `inv start/stop/restart` act on and wait for, and what `inv teardown` lists, from
recorded lab outputs (tests/data/fleet/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.errors import InventoryError
from gpunode.fleet import control, teardown
from gpunode.fleet.status import parse

DATA = Path(__file__).resolve().parents[1] / "data" / "fleet"
REPORT = parse("lab/200", (DATA / "status-gather-cpu.txt").read_text())


def test_one_server_the_router_or_all_of_them():
    assert [u.id for u in control.select(REPORT, "cpu1", False)] == ["gpunode-cpu1.service"]
    assert [u.id for u in control.select(REPORT, None, True)] == ["gpunode-router.service"]
    assert [u.id for u in control.select(REPORT, None, False)] == [
        "gpunode-cpu0.service", "gpunode-cpu1.service", "gpunode-router.service"]


def test_unknown_names_are_refused_with_the_names_there():
    with pytest.raises(InventoryError, match="no server 'cpu9'") as err:
        control.select(REPORT, "cpu9", False)
    assert "servers there: cpu0, cpu1" in str(err.value)
    with pytest.raises(InventoryError, match="not both"):
        control.select(REPORT, "cpu0", True)
    with pytest.raises(InventoryError, match="no server 'demo'"):
        control.select(REPORT, "demo", False)   # a gpunode unit, but not a server


def test_the_readiness_wait_is_provisions_servers_first_router_on_readiness():
    eps = control.endpoints(REPORT, control.select(REPORT, None, False)[::-1])
    assert [(e.name, e.unit, e.url, e.model, e.health) for e in eps] == [
        ("cpu1", "gpunode-cpu1.service", "http://127.0.0.1:30002", "tiny-qwen3", "/health"),
        ("cpu0", "gpunode-cpu0.service", "http://127.0.0.1:30001", "tiny-qwen3", "/health"),
        ("router", "gpunode-router.service", "http://127.0.0.1:30000", "tiny-qwen3", "/readiness")]


def test_teardown_lists_units_paths_staged_weights_and_with_purge_the_journal():
    r = teardown.parse_listing("lab/200", (DATA / "teardown-list-cpu.txt").read_text())
    assert [u.rsplit("/", 1)[1] for u in r.units] == [
        "gpunode-cpu0.service", "gpunode-cpu1.service", "gpunode-demo.service", "gpunode-router.service",
        "gpunode-stage-weights.service"]
    assert [p for _, p in r.paths][:4] == ["/etc/gpunode", "/opt/gpunode/venvs", "/opt/gpunode/tools",
                                          "/usr/local/lib/gpunode"]
    assert "/usr/local/bin/uv" in [p for _, p in r.paths]
    assert r.staged == [(3488, "/dev/shm/tiny-qwen3")]
    assert r.state == [(28, "/var/lib/gpunode")]
    text = "\n".join(r.lines())
    assert "path   /opt/gpunode/venvs  (2374.6 MiB)" in text and "staged /dev/shm/tiny-qwen3  (3.4 MiB)" in text


def test_teardown_of_a_target_without_gpunode_lists_nothing():
    empty = teardown.parse_listing("x", "@@section units\n@@section paths\n@@section staged\n@@section state\n")
    assert empty.empty and empty.lines() == []


def test_minus_i_is_the_inventory_in_every_fleet_task_as_in_provision():
    from gpunode.cli import control as control_cli
    from gpunode.cli import fleet as fleet_cli

    for t in (*fleet_cli.ns, *control_cli.ns):
        (arg,) = [a for a in t.get_arguments() if "i" in a.names]
        assert arg.names == ("inventory", "i"), t.name
