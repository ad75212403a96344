"""The fleet endpoint (docs/fleet.md): who is in a fleet, the workers' URLs, the router's unit and
env file, and how the FleetWorkers step reads the real sglang-router 0.3.2's GET /workers
(tests/data/fleet/endpoint/README.md says where each answer came from)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpunode.bench.runner import Endpoint, Layout, Spec, steps
from gpunode.cli.common import select_targets
from gpunode.errors import InventoryError
from gpunode.fleet import endpoint, router_role
from gpunode.fleet import provision as fleetp
from gpunode.inventory import load
from gpunode.steps.base import Change, NoChange, Probe
from gpunode.steps.files import File, Template
from gpunode.steps.fleet import FleetWorkers

DATA = Path(__file__).resolve().parents[1] / "data" / "fleet" / "endpoint"
FACTS = SimpleNamespace(system=SimpleNamespace(pythons=("3.11",), default_python="3.11", arch="x86_64"))


def inventory(tmp_path: Path, extra: str = "", member_vars: str = "fleet_address: 10.0.0.2, host: 0.0.0.0") -> Path:
    path = tmp_path / "hosts.yml"
    path.write_text(f"""
hosts:
  kpro6: {{address: 192.0.2.16, user: root}}
  rented: {{address: 198.51.100.7, user: ubuntu}}
  pve:
    address: 192.0.2.1
    containers:
      301: {{vars: {{{member_vars}}}}}
      302: {{vars: {{fleet_router_only: true, fleet_address: 10.0.0.3}}}}
groups:
  job: {{hosts: [kpro6, rented, pve], vars: {{fleet_router: pve/302, host: 0.0.0.0{extra}}}}}
""")
    return path


def targets(path: Path) -> list:
    return fleetp.every_target(load(path), {})


def plan(*ports: int) -> SimpleNamespace:
    return SimpleNamespace(servers=[SimpleNamespace(name=f"gpu{i}", port=p) for i, p in enumerate(ports)])


def test_every_target_of_the_group_is_a_member_and_the_router_target_is_named(tmp_path):
    every = targets(inventory(tmp_path))
    # the router-only container is in the group too: it holds the router, not servers
    assert endpoint.fleets(every) == {"pve/302": endpoint.Fleet("pve/302", ("kpro6", "pve/301", "rented"))}


def test_workers_are_each_members_servers_at_its_address(tmp_path):
    by = {t.name: t for t in targets(inventory(tmp_path))}
    assert [w.url for w in endpoint.workers(by["kpro6"], plan(30001, 30002))] == \
        ["http://192.0.2.16:30001", "http://192.0.2.16:30002"]   # a plain host: its SSH address
    assert endpoint.workers(by["pve/301"], plan(30001)) == [endpoint.Worker("http://10.0.0.2:30001", "pve/301",
                                                                            "gpu0")]


def test_a_container_without_fleet_address_is_refused_by_name(tmp_path):
    by = {t.name: t for t in targets(inventory(tmp_path, member_vars="host: 0.0.0.0"))}
    with pytest.raises(InventoryError, match="pve/301 is in a fleet but has no fleet_address") as e:
        endpoint.workers(by["pve/301"], plan(30001))
    assert "set fleet_address" in (e.value.hint or "")


def test_servers_on_loopback_are_refused_before_anything_runs(tmp_path):
    path = inventory(tmp_path, member_vars="fleet_address: 10.0.0.2, host: 127.0.0.1")
    inv = load(path)
    with pytest.raises(InventoryError, match=r"pve/301: its servers listen on host=127.0.0.1") as e:
        fleetp.check_members(select_targets(inv, None, None, "job", {}), targets(path))
    assert "host: 0.0.0.0 or host: 10.0.0.2" in (e.value.hint or "")


def test_a_router_target_missing_from_the_inventory_is_refused(tmp_path):
    path = inventory(tmp_path)
    path.write_text(path.read_text().replace("fleet_router: pve/302", "fleet_router: pve/399"))
    with pytest.raises(InventoryError, match="fleet_router: pve/399 names no target of the inventory"):
        fleetp.check_members(select_targets(load(path), None, None, "job", {}), targets(path))


def test_the_router_only_target_selected_without_its_members_is_refused(tmp_path):
    """Issue 44: `inv provision --host pve --ct 302` (the router's target alone, after its clients' key
    changed) used to exit 0 having done nothing: its run is built from the members' plans."""
    path = inventory(tmp_path)
    inv = load(path)
    with pytest.raises(InventoryError, match=r"pve/302 holds only the fleet router of kpro6, pve/301, rented, .*"
                                             r"without kpro6, pve/301, rented this run would change nothing") as e:
        fleetp.check_router_only(select_targets(inv, "pve", 302, None, {}), lambda: targets(path))
    assert "--group" in (e.value.hint or "")
    # with its whole fleet (the group), or a run without it: nothing to refuse
    fleetp.check_router_only(select_targets(inv, None, None, "job", {}), lambda: targets(path))
    fleetp.check_router_only(select_targets(inv, "pve", 301, None, {}), lambda: targets(path))


def test_a_run_of_part_of_a_fleet_leaves_its_router_alone_and_says_so(tmp_path):
    every = targets(inventory(tmp_path))
    kpro6 = next(t for t in every if t.name == "kpro6")
    ran = SimpleNamespace(target=kpro6, plan=plan(30001), facts=FACTS)

    def no_transport(target):
        raise AssertionError(f"the router's target {target.name} was contacted")

    recaps, notes = fleetp.provision_fleets([ran], every, no_transport, check=False, diff=False,
                                            emit=lambda e: None, owner=None)  # type: ignore[arg-type]
    assert recaps == []
    assert notes == ["fleet router on pve/302: left as it is: this run did not provision pve/301, rented "
                     "(provision the whole fleet to change its workers)"]


def rendered(tmp_path: Path, urls: list[int]) -> dict[str, str]:
    by = {t.name: t for t in targets(inventory(tmp_path))}
    ws = [endpoint.Worker(f"http://10.0.0.{n}:30001", f"pve/{300 + n}", "cpu0") for n in urls]
    plans = router_role.build(by["pve/302"], FACTS, ws, "round_robin")
    return {s.path: s.content for p in plans for s in p.steps if isinstance(s, File | Template)}


def test_the_router_unit_and_its_env_file_as_rendered(tmp_path):
    files = rendered(tmp_path, [2, 4])
    unit = files["/etc/systemd/system/gpunode-fleet-router.service"]
    assert unit == (DATA / "gpunode-fleet-router.service").read_text()
    assert files["/etc/gpunode/fleet-router.env"] == (DATA / "fleet-router.env").read_text()
    assert files["/etc/gpunode/fleet-router.workers"] == ("http://10.0.0.2:30001 pve/302 cpu0\n"
                                                          "http://10.0.0.4:30001 pve/304 cpu0\n")


def test_a_node_joining_changes_the_env_file_not_the_unit(tmp_path):
    two, three = rendered(tmp_path, [2, 4]), rendered(tmp_path, [2, 4, 5])
    unit = "/etc/systemd/system/gpunode-fleet-router.service"
    assert two[unit] == three[unit]        # so the router is not restarted
    assert two["/etc/gpunode/fleet-router.env"] != three["/etc/gpunode/fleet-router.env"]


def step(*urls: str) -> FleetWorkers:
    return FleetWorkers(url="http://127.0.0.1:31000", python="/opt/gpunode/venvs/router/bin/python",
                        workers=list(urls))


def answer(name: str) -> Probe:
    return Probe(0, (DATA / name).read_text())


def test_the_routers_list_matches_the_fleet_nothing_to_do():
    got = step("http://127.0.0.1:31001", "http://127.0.0.1:31002").check(answer("workers-two-healthy.json"))
    assert got == NoChange("the router lists all 2 workers, each healthy")


def test_a_new_member_is_added_and_a_removed_one_dropped():
    got = step("http://127.0.0.1:31001", "http://127.0.0.1:31003").check(answer("workers-two-healthy.json"))
    assert got == Change("add http://127.0.0.1:31003; remove http://127.0.0.1:31002")


def test_an_unhealthy_worker_is_waited_for():
    got = step("http://127.0.0.1:31001", "http://127.0.0.1:31002").check(answer("workers-one-unhealthy.json"))
    assert got == Change("wait for http://127.0.0.1:31002 to be healthy")


def test_a_router_that_does_not_answer_yet():
    # curl exits 7 (connection refused) before the router runs
    assert isinstance(step("http://127.0.0.1:31001").check(Probe(7, "")), Change)
    # a POST's 202 answer is not a list: not taken for one
    assert isinstance(step("http://127.0.0.1:31001").check(answer("post-workers-202.json")), Change)


def test_the_apply_adds_and_removes_over_the_routers_api():
    (cmd,) = step("http://127.0.0.1:31001").commands()
    script = cmd.argv[2]
    assert cmd.argv[0] == "/opt/gpunode/venvs/router/bin/python"
    assert '{"url": url, "api_key": key} if key else {"url": url}' in script
    assert 'call("DELETE", "/workers/" + w["id"])' in script
    assert json.loads((DATA / "post-workers-202.json").read_text())["status"] == "accepted"


def test_bench_fleet_puts_c_per_server_of_the_whole_fleet_through_the_router():
    lay = Layout([Endpoint("cpu0", "http://127.0.0.1:30001")], Endpoint("fleet-router", "http://10.0.0.3:30100"),
                 "tiny", "", "", "vllm-cpu", "p", fleet_workers=3)
    assert steps(Spec(concurrency=[1, 4]), lay) == [
        ("fleet", 1, [(lay.router, 3, 48)]), ("fleet", 4, [(lay.router, 12, 48)])]
