"""Fleet and multi-node mistakes the inventory alone shows, refused before any node is contacted
(issue 41): each was found only after facts, or not at all (a router port taken by a server, two
members at one address, a head the other nodes cannot reach)."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

from gpunode.errors import InventoryError

DIST_INIT_PORT = 20000  # resolve/multinode.py's default


def _where(t: Any, key: str) -> str:
    return str(t.origins.get(key, "the inventory"))


def _port(t: Any, key: str, default: int) -> int:
    value = t.vars.get(key, default)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def fleet(targets: Sequence[Any], every: list[Any]) -> None:
    from gpunode.fleet import endpoint

    for name, f in endpoint.fleets(every).items():
        if not any(t.name in f.members for t in targets):
            continue
        members = [t for t in every if t.name in f.members]
        seen: dict[str, str] = {}
        for m in members:
            address = endpoint.address_of(m)
            if address in seen:
                raise InventoryError(f"fleet of {name}: {seen[address]} and {m.name} have one address, {address}; "
                                     "the router would send both members' requests to one of them", target=m.name,
                                     hint=f"give each member its own fleet_address ({_where(m, 'fleet_address')})")
            seen[address] = m.name
        router = next((t for t in every if t.name == name), None)
        if router is None:
            continue
        if router.vars.get("fleet_router_only"):
            continue  # no servers of its own there
        port = _port(router, "fleet_router_port", endpoint.ROUTER_PORT)
        base = _port(router, "base_port", 30001)
        # a node serves at most 8 servers (one per GPU) from base_port on
        taken = {"its router_port": _port(router, "router_port", 30000),
                 **{f"the port of its server {i + 1} (base_port {base} + {i})": base + i for i in range(8)}}
        clash = next((k for k, v in taken.items() if v == port), None)
        if clash:
            raise InventoryError(f"{router.name}: fleet_router_port {port} is also {clash}", target=router.name,
                                 hint=f"move fleet_router_port ({_where(router, 'fleet_router_port')}) off the "
                                 "servers' and router's ports")


def multinode(targets: Sequence[Any], inv: Any) -> None:
    """A selected multi-node group: its head reachable by the others, all its nodes selected, and
    dist_init_port on no port of a server."""
    from gpunode.resolve.multinode import node_address

    head = targets[0]
    address = node_address(head)
    try:
        loopback = ipaddress.ip_address(address).is_loopback
    except ValueError:
        loopback = address == "localhost"
    if loopback:
        raise InventoryError(f"the head {head.name}'s address {address} is loopback, where the other "
                             "nodes do not find it", target=head.name,
                             hint="set multinode_address: to the head's address on the nodes' network")
    chosen = {t.name for t in targets}
    for group, values in inv.group_vars.items():
        if not values.get("multinode"):
            continue
        nodes = [t.name for t in inv.group_targets(group)]
        left = [n for n in nodes if n not in chosen]
        if left and any(n in chosen for n in nodes):
            raise InventoryError(f"group {group} is one multi-node server, but this run selects only "
                                 f"{', '.join(n for n in nodes if n in chosen)} of it (not {', '.join(left)})",
                                 hint=f"run the whole group: --group {group}, without a --limit that leaves nodes out")
    for t in targets:
        port = _port(t, "dist_init_port", DIST_INIT_PORT)
        ports = (("base_port", _port(t, "base_port", 30001)), ("router_port", _port(t, "router_port", 30000)))
        for key, value in ports:
            if port == value:
                raise InventoryError(f"{t.name}: dist_init_port {port} is also its {key}", target=t.name,
                                     hint=f"move dist_init_port ({_where(t, 'dist_init_port')}) off the servers' "
                                     "ports")
