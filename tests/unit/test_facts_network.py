"""The network facts of a multi-node node, from recorded real outputs (tests/data/network/README.md):
the interface NCCL_SOCKET_IFNAME names, the InfiniBand ports NCCL_IB_HCA names, and the probe's own
InfiniBand section run on a sysfs tree made here."""

from __future__ import annotations

import subprocess

from gpunode.facts import network
from gpunode.facts.probe import script
from tests.unit.resolve_facts import DATA

NET = DATA / "network"


def text(name: str) -> str:
    return (NET / name).read_text()


def test_a_remote_head_is_reached_through_the_routes_interface():
    n = network.parse_network("8.8.8.8", text("route-get-remote-debian12.txt"), None, None)
    assert (n.interface, n.source, n.problem) == ("eth0", "192.0.2.2", "")


def test_the_head_itself_names_the_interface_holding_its_address_not_lo():
    n = network.parse_network("192.0.2.2", text("route-get-own-address-debian12.txt"),
                              text("addr-show-debian12.txt"), None)
    assert (n.interface, n.source) == ("eth0", "192.0.2.2")


def test_a_local_address_no_interface_holds_is_a_problem_not_a_guess():
    n = network.parse_network("192.0.2.2", text("route-get-own-address-debian12.txt"), "", None)
    assert n.interface is None and "no interface other than lo" in n.problem


def test_a_second_node_reaches_the_head_through_its_own_interface():
    n = network.parse_network("192.0.2.2", text("route-get-head-from-peer-netns.txt"), None, None)
    assert (n.interface, n.source) == ("eth1", "192.0.2.3")


def test_an_unreachable_head_is_said_with_ips_own_words():
    n = network.parse_network("192.0.2.2", text("route-get-unreachable-netns.txt"), None, None)
    assert n.interface is None and "Network is unreachable" in n.problem


def test_ibstat_ports_that_are_down_are_not_active():
    ports = network.parse_ib(text("ibstat-a100-one-port-down-nccl-tests-128-cut.txt"))
    assert [(p.hca, p.active, p.link_layer, p.rate) for p in ports] == [
        ("mlx5_0:1", True, "InfiniBand", "200"), ("mlx5_1:1", False, "InfiniBand", "10")]


def test_ibstat_of_an_h20_node_and_ibstatus_of_roce_ports():
    h20 = network.parse_ib(text("ibstat-h20-400g-deepep-303-cut.txt"))
    assert [p.hca for p in h20 if p.active] == ["mlx5_0:1", "mlx5_1:1"] and h20[0].rate == "400"
    roce = network.parse_ib(text("ibstatus-roce-nccl-1866-cut.txt"))
    assert [(p.hca, p.active, p.link_layer) for p in roce] == [("mlx5_0:1", True, "Ethernet"),
                                                              ("mlx5_1:1", True, "Ethernet")]
    assert roce[0].rate == "100 Gb/sec (4X EDR)"


def test_the_probes_infiniband_section_prints_what_the_parser_reads(tmp_path):
    """The section's shell text on a sysfs tree with sysfs's own values: one port up, one down."""
    for dev, state, rate in (("mlx5_0", "4: ACTIVE", "400 Gb/sec (4X NDR)"),
                             ("mlx5_1", "1: DOWN", "10 Gb/sec (4X SDR)")):
        port = tmp_path / dev / "ports" / "1"
        port.mkdir(parents=True)
        (port / "state").write_text(state + "\n")
        (port / "rate").write_text(rate + "\n")
        (port / "link_layer").write_text("InfiniBand\n")
    probe = script(network.snippets("10.0.0.1"))
    out = subprocess.run(["sh", "-c", probe, "sh", "NONCE", "", "", "/opt/gpunode/venvs"], capture_output=True,
                         text=True, env={"GN_IB_ROOT": str(tmp_path), "PATH": "/usr/bin:/bin"}, timeout=30).stdout
    section = out.split("@@gpunode:NONCE:section infiniband\n", 1)[1].split("\n@@gpunode:NONCE:rc", 1)[0]
    ports = network.parse_ib(section)
    assert [(p.hca, p.active, p.rate) for p in ports] == [("mlx5_0:1", True, "400 Gb/sec (4X NDR)"),
                                                         ("mlx5_1:1", False, "10 Gb/sec (4X SDR)")]
    assert "@@gpunode:NONCE:section net_route" in out   # the route section runs in the same probe
