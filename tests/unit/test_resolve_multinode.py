"""Multi-node plans on recorded real facts: the GPUs of tests/data/nvidia-smi, the model configs of
tests/data/models and the route and InfiniBand outputs of tests/data/network (each with its README).

Two 8x H100 nodes serve DeepSeek-R1 (DeepseekV3ForCausalLM, 685 GB of FP8, which one node refuses);
two 4-GPU RTX PRO 6000 nodes serve MiMo-V2-Flash (317 GB of FP8) without InfiniBand, while
MiniMax-M2.5 (230 GB, the issue's "200 GB model") fits one such node (384 GB) and stays there; nodes whose
facts differ are refused by name; the rendered units pass `systemd-analyze verify`."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace

import pytest

from gpunode import roles
from gpunode.errors import ResolveError
from gpunode.facts import network
from gpunode.facts.types import Driver
from gpunode.resolve import resolve
from gpunode.resolve.multinode import Member, resolve_group
from tests.unit.resolve_facts import DATA, cpu_box, on
from tests.unit.test_resolve_model_fit import model
from tests.unit.test_unit_injection import files_of

NET = DATA / "network"
HEAD, PEER = "192.0.2.2", "192.0.2.3"


def text(name: str) -> str:
    return (NET / name).read_text()


def head_net(ib: str | None) -> network.Network:
    return network.parse_network(HEAD, text("route-get-own-address-debian12.txt"), text("addr-show-debian12.txt"),
                                 text(ib) if ib else None)


def peer_net(ib: str | None) -> network.Network:
    return network.parse_network(HEAD, text("route-get-head-from-peer-netns.txt"), None, text(ib) if ib else None)


def h100_pair(ib: str | None = "ibstat-h20-400g-deepep-303-cut.txt", name: str = "deepseek-r1"):
    m = model(name)
    a = replace(on("h100-x8", model=m), target="h100-a", network=head_net(ib))
    b = replace(on("h100-x8", model=m), target="h100-b", network=peer_net(ib))
    return [Member(a, HEAD), Member(b, PEER)]


def pro6000_pair(name: str = "mimo-v2-flash"):
    """Two nodes of four RTX PRO 6000 each: the recorded 8-GPU kpro6 output, its first four GPUs per node."""
    m = model(name)
    base = on("rtx-pro-6000-x8", model=m)
    four = base.gpus[:4]
    a = replace(base, target="pro-a", gpus=four, network=head_net(None))
    b = replace(base, target="pro-b", gpus=four, network=peer_net(None))
    return [Member(a, HEAD), Member(b, PEER)]


def flag(plan, name: str) -> str:
    args = plan.servers[0].args
    return args[args.index(name) + 1]


def test_deepseek_v3_does_not_fit_one_h100_node_and_the_refusal_points_at_multinode():
    with pytest.raises(ResolveError) as exc:
        resolve(h100_pair()[0].facts)
    assert "does not fit" in exc.value.message and "multinode: true" in exc.value.hint


def test_two_h100_nodes_serve_deepseek_v3_with_sglangs_own_multi_node_launch():
    head, peer = resolve_group(h100_pair())
    for rank, plan in enumerate((head, peer)):
        assert plan.topology.kind == "multi-node" and plan.topology.tp == 16 and len(plan.servers) == 1
        assert plan.servers[0].cuda_visible_devices == "0,1,2,3,4,5,6,7"
        assert (flag(plan, "--tp-size"), flag(plan, "--nnodes"), flag(plan, "--node-rank")) == ("16", "2", str(rank))
        assert flag(plan, "--dist-init-addr") == f"{HEAD}:20000"
        assert plan.router is None
    # the same stack everywhere; the command lines differ only in --node-rank
    assert (head.pinset, head.python, head.lock) == (peer.pinset, peer.python, peer.lock)
    differ = [(x, y) for x, y in zip(head.servers[0].args, peer.servers[0].args, strict=True) if x != y]
    assert differ == [("0", "1")]
    assert head.servers[0].serves_http and not peer.servers[0].serves_http
    # NCCL: each node's own interface toward the head, and the InfiniBand ports that are up
    assert (head.env["NCCL_SOCKET_IFNAME"], peer.env["NCCL_SOCKET_IFNAME"]) == ("eth0", "eth1")
    assert head.env["NCCL_IB_HCA"] == peer.env["NCCL_IB_HCA"] == "mlx5_0:1,mlx5_1:1"
    why = head.decision("multi-node")
    assert why.value == "2 nodes, tp 16" and "does not fit on 8 GPU(s)" in why.reason
    assert "TCP 20000 on the head" in why.reason and "only the head serves HTTP" in why.reason
    assert not any("TCP sockets" in w for w in head.warnings)


def test_a_port_that_is_down_is_left_out_of_nccl_ib_hca():
    head, _ = resolve_group(h100_pair("ibstat-a100-one-port-down-nccl-tests-128-cut.txt"))
    assert head.env["NCCL_IB_HCA"] == "mlx5_0:1"


def test_two_four_gpu_rtx_pro_6000_nodes_serve_a_317_gb_model_over_tcp_with_a_warning():
    members = pro6000_pair()
    with pytest.raises(ResolveError, match="does not fit"):
        resolve(members[0].facts)
    head, peer = resolve_group(members)
    assert head.model.size_bytes > 300 * 10**9
    assert (flag(head, "--tp-size"), flag(peer, "--node-rank")) == ("8", "1")
    assert "NCCL_IB_HCA" not in head.env and head.env["NCCL_SOCKET_IFNAME"] == "eth0"
    assert any("NCCL falls back to TCP" in w and "slow" in w for w in head.warnings), head.warnings
    assert "over TCP here" in head.decision("multi-node").reason


def test_pipeline_parallelism_keeps_tensor_parallelism_inside_each_node():
    head, peer = resolve_group(pro6000_pair(), {"multinode_parallel": "pipeline"})
    assert (flag(head, "--tp-size"), flag(head, "--pp-size"), flag(peer, "--pp-size")) == ("4", "2", "2")
    assert head.topology.pp == 2 and "pipeline bubble" in head.decision("multi-node").reason


@pytest.mark.parametrize("pair", [lambda: h100_pair(name="qwen3-30b-a3b-fp8"), lambda: pro6000_pair("minimax-m2.5")])
def test_a_model_that_fits_one_node_is_not_split_across_nodes(pair):
    plans = resolve_group(pair())
    assert all(p.topology.kind != "multi-node" and "--nnodes" not in p.servers[0].args for p in plans)
    assert plans[0].decision("multi-node").value == "not needed"
    assert plans[0].pinset == plans[1].pinset


def test_a_group_of_cpu_nodes_keeps_one_set_of_servers_per_node_and_says_why_vllm_cpu_cannot_split():
    """The lab's CPU engine has no working launch for a second node (docs/multinode.md, issue 48): the plan of
    each node is its single-node plan, and the decision names what stops the split."""
    a, b = replace(cpu_box(), target="cpu-a"), replace(cpu_box(), target="cpu-b")
    plans = resolve_group([Member(a, "10.231.0.61"), Member(b, "10.231.0.62")], {"multinode": True})
    alone = resolve(a, {"multinode": True})
    assert [p.servers for p in plans] == [alone.servers, alone.servers]
    assert all(p.engine == "vllm-cpu" and "--nnodes" not in p.servers[0].args for p in plans)
    d = plans[1].decision("multi-node")
    assert d.value == "not possible with vllm-cpu"
    assert "vllm serve --headless" in d.reason and "PackageNotFoundError" in d.reason
    assert "docs/multinode.md" in d.source


@pytest.mark.parametrize(("change", "words"), [
    (lambda f: replace(f, gpus=on("b200-x8").gpus), ["GPU model", "h100-a has NVIDIA H100", "h100-b has NVIDIA B200"]),
    (lambda f: replace(f, system=replace(f.system, arch="aarch64")),
     ["host architecture", "h100-a has x86_64", "h100-b has aarch64"]),
    (lambda f: replace(f, driver=Driver("580.95.05", "13.0")), ["driver branch", "h100-b has 580", "CUDA the driver"]),
    (lambda f: replace(f, gpus=f.gpus[:4]), ["GPU count", "h100-a has 8", "h100-b has 4"]),
])
def test_nodes_whose_facts_differ_are_refused_naming_the_nodes_and_the_difference(change, words):
    a, b = h100_pair()
    with pytest.raises(ResolveError) as exc:
        resolve_group([a, replace(b, facts=change(b.facts))])
    assert all(w in exc.value.message for w in words), exc.value.message


def test_a_node_without_a_route_to_the_head_is_refused_with_what_to_set():
    a, b = h100_pair()
    lost = network.parse_network(HEAD, text("route-get-unreachable-netns.txt"), None, None)
    with pytest.raises(ResolveError) as exc:
        resolve_group([a, replace(b, facts=replace(b.facts, network=lost))])
    assert "h100-b" in exc.value.message and "Network is unreachable" in exc.value.message
    assert "nccl_socket_ifname" in exc.value.hint
    plans = resolve_group([a, replace(b, facts=replace(b.facts, network=lost))], {"nccl_socket_ifname": "ib0"})
    assert plans[1].env["NCCL_SOCKET_IFNAME"] == plans[1].env["GLOO_SOCKET_IFNAME"] == "ib0"


def test_one_target_is_no_group():
    with pytest.raises(ResolveError, match="at least two"):
        resolve_group(h100_pair()[:1])


def node_vars() -> dict:
    """The group's variables, which the plans are resolved from (pipeline.provision_group) and the roles read."""
    return {**roles.defaults(), "model_source": "/srv/models/deepseek-r1", "multinode": True}


def node_units(member: Member, plan) -> dict[str, str]:
    from gpunode.inventory import Host, Target
    from gpunode.pipeline import target_vars

    target = Target(Host(name=member.facts.target, address=member.address), None, node_vars())
    ctx = roles.RoleContext(target=target.name, vars=target_vars(target), facts=member.facts, plan=plan)
    return roles.build(["servers"], ctx), files_of(roles.build(["servers"], ctx))


def test_each_nodes_unit_runs_its_rank_and_readiness_waits_on_the_head_only():
    members = h100_pair()
    plans = resolve_group(members, node_vars())
    (head_roles, head_files), (peer_roles, peer_files) = (node_units(m, p) for m, p in zip(members, plans, strict=True))
    unit = "/etc/systemd/system/gpunode-gpu0-7.service"
    assert "--node-rank 0" in head_files[unit] and "--node-rank 1" in peer_files[unit]
    assert 'NCCL_SOCKET_IFNAME="eth1"' in peer_files["/etc/gpunode/gpu0-7.env"]
    assert [r.name for r in head_roles] == ["servers", "services", "ready"]
    assert [r.name for r in peer_roles] == ["servers", "services"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
def test_the_rendered_units_pass_systemd_analyze_verify(tmp_path):
    """Each node's units in a folder of their own, as the lab's check test reads them (tests/lab/
    test_provision_check_gpu.py), with a broken control unit beside them."""
    members = h100_pair()
    for m, plan in zip(members, resolve_group(members, node_vars()), strict=True):
        folder = tmp_path / m.facts.target
        folder.mkdir()
        _, files = node_units(m, plan)
        for path, body in files.items():
            if path.endswith(".service"):
                (folder / path.rsplit("/", 1)[1]).write_text(body)
        (folder / "control.service").write_text("[Service]\nExecStart=/bin/true\nthis is no setting\n")
        units = sorted(p.name for p in folder.glob("*.service"))
        assert units == ["control.service", "gpunode-gpu0-7.service", "gpunode-stage-weights.service"]
        out = subprocess.run(["systemd-analyze", "verify", *(f"./{u}" for u in units)], cwd=folder,
                             capture_output=True, text=True, timeout=120)
        lines = [x for x in (out.stdout + out.stderr).splitlines() if x.strip()]
        assert any("control.service" in x and "Missing '='" in x for x in lines), lines   # verify read the files
        # what the units run is installed by roles a render does not apply
        complaints = [x for x in lines if "control.service" not in x and "is not executable" not in x
                      and "No such file or directory" not in x and "has fatal error" not in x]
        assert complaints == [], f"{m.facts.target}: " + "\n".join(lines)


def test_infiniband_on_one_node_only_is_not_used_and_the_warning_names_the_node_without():
    a, b = h100_pair()
    plain = replace(b, facts=replace(b.facts, network=peer_net(None)))
    head, peer = resolve_group([a, plain])
    assert "NCCL_IB_HCA" not in head.env and "NCCL_IB_HCA" not in peer.env
    assert any("no InfiniBand/RoCE port up on h100-b" in w for w in head.warnings), head.warnings
