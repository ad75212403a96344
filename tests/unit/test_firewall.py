"""The servers' host firewall (issue 44, docs/fleet.md 'Firewall'): an nftables table of gpunode's own
that lets only the fleet router (and fleet_firewall_allow) reach a member's server ports.

The probe outputs are recorded from the real nft (tests/data/firewall/README.md); the lab test
(tests/lab/test_fleet_endpoint_lab.py) loads the table in real containers and connects to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode import roles, variables
from gpunode.errors import InventoryError, StepError
from gpunode.fleet import provision as fleetp
from gpunode.inventory import load
from gpunode.resolve import resolve
from gpunode.roles.context import RoleContext
from gpunode.steps.base import Change, NoChange, Probe
from gpunode.steps.files import File
from gpunode.steps.firewall import NftTable, NoFirewall, ruleset
from gpunode.steps.judge import EngineJudge
from gpunode.steps.rolling import Keep
from gpunode.steps.systemd import Service, UnitTemplate
from tests.unit import systemd_parse
from tests.unit.resolve_facts import field_notes

# the shipped roles load as a user's do (gpunode.roles.module), not as gpunode.roles.<name>
role_firewall = roles.module("servers", "firewall")
servers_role = roles.module("servers")

DATA = Path(__file__).parent.parent / "data" / "firewall"
RECORDED = ruleset([30001, 30002], ["10.231.0.23", "fd00::1", "10.0.0.0/24"], "x")  # what was loaded


def probe(name: str) -> Probe:
    return Probe(0, (DATA / name).read_text())


def test_the_ruleset_lets_only_the_sources_reach_the_ports_and_replaces_the_table_whole():
    text = ruleset([30002, 30001, 30001], ["10.0.0.3", "10.0.0.3/32", "fd00::1"], "x")
    lines = [x.strip() for x in text.splitlines()]
    # one transaction: the table made (if missing), deleted, made again: nothing of an old one is left
    assert lines[2:5] == ["table inet gpunode", "delete table inet gpunode", "table inet gpunode {"]
    assert 'iif "lo" accept' in lines
    assert "tcp dport { 30001, 30002 } ip saddr { 10.0.0.3 } accept" in lines
    assert "tcp dport { 30001, 30002 } ip6 saddr { fd00::1 } accept" in lines
    assert lines.index("tcp dport { 30001, 30002 } drop") > lines.index('iif "lo" accept')
    assert "policy accept;" in text  # other ports are left alone


def test_a_host_name_is_refused_naming_it():
    with pytest.raises(StepError) as err:
        ruleset([30001], ["router.lan"], "lab/221: fleet_firewall_allow")
    assert "'router.lan'" in str(err.value) and "lab/221" in str(err.value)


def test_the_table_is_loaded_until_the_live_one_is_what_gpunode_loaded():
    step = NftTable(content=RECORDED)
    assert isinstance(step.check(Probe(0, "nft no\n")), Change)
    assert "no such table" in step.check(probe("probe-none.txt")).summary
    assert isinstance(step.check(probe("probe-loaded.txt")), NoChange)
    assert "changed by hand" in step.check(probe("probe-changed-by-hand.txt")).summary
    other = NftTable(content=ruleset([30001], ["10.231.0.23"], "x"))
    assert "rules changed" in other.check(probe("probe-loaded.txt")).summary


def test_without_the_firewall_whatever_is_left_of_it_goes():
    step = NoFirewall()
    assert isinstance(step.check(Probe(0, "absent\n")), NoChange)
    change = step.check(Probe(0, "present\n"))
    assert isinstance(change, Change) and "gpunode-firewall.service" in change.summary


def ctx_for(**extra) -> RoleContext:
    v = {**roles.defaults(), "model_source": "/dev/shm/Qwen3.6-27B", "host": "0.0.0.0", **extra}
    variables.check(v)
    return RoleContext(target="kpro6/200", vars=v, facts=field_notes(), plan=resolve(field_notes(), v))


def firewall_steps(**extra) -> list:
    ctx = ctx_for(**extra)
    steps = role_firewall.steps(ctx)
    (plan, *_) = servers_role.build(ctx)
    # in the servers role, after the engine's judge and before the servers' files: the ports are closed
    # before a server listens on them
    assert plan.name == "servers" and isinstance(plan.steps[0], EngineJudge)
    assert [s.id for s in plan.steps[1:1 + len(steps)]] == [s.id for s in steps]
    return steps


def test_a_member_with_fleet_firewall_gets_the_table_its_file_and_its_unit():
    steps = firewall_steps(fleet_firewall=True, fleet_router="kpro6/300", fleet_router_address="10.0.0.30",
                           fleet_firewall_allow=["192.0.2.0/24"])
    rules = next(s for s in steps if isinstance(s, File) and s.path == "/etc/gpunode/firewall.nft")
    ports = ", ".join(str(s.port) for s in ctx_for().plan.servers)
    assert f"tcp dport {{ {ports} }} ip saddr {{ 10.0.0.30, 192.0.2.0/24 }} accept" in rules.content
    unit = next(s for s in steps if isinstance(s, UnitTemplate))
    service = {k: x for section, k, x in systemd_parse.settings(unit.content) if section == "Service"}
    assert service["ExecStart"] == "/usr/sbin/nft -f /etc/gpunode/firewall.nft"
    assert service["ExecStop"] == "-/usr/sbin/nft delete table inet gpunode"  # teardown stops it: the table goes
    assert any(isinstance(s, Service) and s.name == "gpunode-firewall.service" for s in steps)
    (table,) = [s for s in steps if isinstance(s, NftTable)]
    assert table.content == rules.content and steps[-1] is table


def test_the_servers_generation_keeps_none_of_the_firewalls_files():
    # a rollback of the servers (steps/rolling.py) puts back their files, not the firewall's
    extra = dict(fleet_firewall=True, fleet_router="kpro6/300", fleet_router_address="10.0.0.30")
    assert any(isinstance(s, File) and s.path == "/etc/gpunode/firewall.nft" for s in firewall_steps(**extra))
    ready = next(p for p in servers_role.build(ctx_for(**extra)) if p.name == "ready")
    (keep,) = [s for s in ready.steps if isinstance(s, Keep)]
    assert keep.files and not [path for path in keep.files if "firewall" in path]


def test_without_fleet_firewall_the_firewall_is_removed():
    assert [type(s) for s in firewall_steps()] == [NoFirewall]


def test_a_firewall_that_lets_nobody_in_is_refused():
    with pytest.raises(InventoryError) as err:
        firewall_steps(fleet_firewall=True)
    assert "fleet_firewall_allow" in err.value.hint


def test_a_plan_made_without_the_routers_address_changes_nothing():
    # inv bench --fleet makes the members' plans; only a provision run knows the router's address
    assert firewall_steps(fleet_firewall=True, fleet_router="kpro6/300") == []


def test_provision_gives_each_member_with_a_firewall_its_routers_address(tmp_path):
    path = tmp_path / "hosts.yml"
    path.write_text("""
hosts:
  pve:
    address: 192.0.2.1
    containers:
      302: {vars: {fleet_address: 10.0.0.2, fleet_firewall: true}}
      303: {vars: {fleet_router_only: true, fleet_address: 10.0.0.3}}
      304: {vars: {fleet_address: 10.0.0.4}}
groups:
  job: {hosts: [pve], vars: {fleet_router: pve/303, host: 0.0.0.0}}
""")
    every = fleetp.every_target(load(path), {})
    assert fleetp.ROUTER_ADDRESS == role_firewall.ROUTER_ADDRESS  # one name, spelled in both (not imported)
    got = {t.name: t.vars.get(fleetp.ROUTER_ADDRESS) for t in fleetp.firewall_sources(every, every)}
    assert got == {"pve/302": "10.0.0.3", "pve/303": None, "pve/304": None}


def test_a_host_name_in_fleet_firewall_allow_is_an_inventory_error_naming_it():
    with pytest.raises(InventoryError) as err:
        firewall_steps(fleet_firewall=True, fleet_firewall_allow=["prometheus.lan"])
    assert "'prometheus.lan'" in str(err.value) and "host names" in err.value.hint
