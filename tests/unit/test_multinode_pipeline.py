"""`inv provision --group` on a multinode group, up to the roles: the probe each node runs asks for its
route to the head, one plan is made from every node's facts, and each node gets its own rank's unit.

Each node answers with recorded real outputs (the probe's sections as a node printed them): the H200
snapshot (tests/data/snapshots/h200), the route and address outputs of tests/data/network and the
config of Meta-Llama-3.1-70B (141 GB of BF16: one H200 cannot hold it, two can)."""

from __future__ import annotations

import pytest

from gpunode import pipeline, roles
from gpunode.errors import InventoryError
from gpunode.facts import snapshot
from gpunode.inventory import Container, Host, Target
from gpunode.resolve.multinode import node_address
from gpunode.transport.base import Result
from tests.unit.resolve_facts import DATA

MODEL = "/srv/models/meta-llama-3.1-70b"


class Replay:
    """A node that answers the facts probe with recorded sections; it keeps the script it was sent."""

    def __init__(self, name: str, route: str, addrs: str | None):
        self.name = name
        self.sections = dict(snapshot.load(DATA / "snapshots" / "h200").sections)
        config = (DATA / "models" / "meta-llama-3.1-70b" / "config.json").read_text()
        self.sections["model_files"] = snapshot.Section(f"{len(config)} ./config.json", 0)
        self.sections["model_config"] = snapshot.Section(config, 0)
        self.sections["net_route"] = snapshot.Section((DATA / "network" / route).read_text(), 0)
        if addrs:
            self.sections["net_addr"] = snapshot.Section((DATA / "network" / addrs).read_text(), 0)
        self.sent = ""

    def script(self, text: str, nonce: str, *args: str, **kwargs) -> Result:
        self.sent = text
        out = "".join(f"@@gpunode:{nonce}:section {k}\n{s.output}\n@@gpunode:{nonce}:rc {s.rc}\n"
                      for k, s in self.sections.items())
        return Result(self.name, ("sh",), 0, out, "")


def node(name: str, address: str, **more) -> Target:
    v = {**roles.defaults(), "multinode": True, "model_source": MODEL, **more}
    return Target(Host(name=name, address=address), None, v)


def test_each_node_probes_its_route_to_the_head_and_gets_its_rank():
    a, b = node("h200-a", "192.0.2.2"), node("h200-b", "192.0.2.3")
    ta = Replay("h200-a", "route-get-own-address-debian12.txt", "addr-show-debian12.txt")
    tb = Replay("h200-b", "route-get-head-from-peer-netns.txt", None)
    assert pipeline.multinode([a, b])
    jobs = pipeline.prepare_group([(a, ta), (b, tb)])
    assert "ip -o route get 192.0.2.2" in ta.sent and "ip -o route get 192.0.2.2" in tb.sent
    head, peer = (j.plan for j in jobs)
    assert [p.topology.node_rank for p in (head, peer)] == [0, 1] and head.topology.tp == 2
    assert (head.env["NCCL_SOCKET_IFNAME"], peer.env["NCCL_SOCKET_IFNAME"]) == ("eth0", "eth1")
    units = [next(s for r in j.roles for s in r.steps if getattr(s, "path", "").endswith("gpu0.service"))
             for j in jobs]
    assert "--node-rank 0" in units[0].content and "--node-rank 1" in units[1].content
    assert "--dist-init-addr 192.0.2.2:20000" in units[1].content
    assert [r.name for r in jobs[1].roles][-1] == "services"   # no readiness wait on a rank without HTTP


def test_a_selection_that_mixes_multinode_and_other_targets_is_refused():
    with pytest.raises(InventoryError, match="h200-c"):
        pipeline.multinode([node("h200-a", "192.0.2.2"), Target(Host(name="h200-c", address="x"), None, {})])


def test_a_container_node_needs_its_own_address():
    ct = Target(Host(name="pve", address="198.51.100.7"), Container(200, None, {}, "test"),
                {"multinode": True})
    with pytest.raises(InventoryError, match="multinode_address"):
        node_address(ct)
    assert node_address(Target(ct.host, ct.container, {"multinode_address": "10.1.0.5"})) == "10.1.0.5"


def test_a_head_known_only_by_name_is_refused_before_any_probe():
    a, b = node("h200-a", "h200-a.lan"), node("h200-b", "192.0.2.3")
    ta = Replay("h200-a", "route-get-own-address-debian12.txt", "addr-show-debian12.txt")
    with pytest.raises(InventoryError, match="multinode_address") as exc:
        pipeline.prepare_group([(a, ta), (b, ta)])
    assert "'h200-a.lan' is not an IP address" in exc.value.message and ta.sent == ""
