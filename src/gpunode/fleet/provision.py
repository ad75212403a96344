"""`inv provision` of a fleet: after every target of the run, the fleet router's own run.

Checked before anything changes (check_members): every member has an address the router can
reach and servers listening on it. Run after the targets (provision_fleets): the workers are
the members' planned servers, so the router's run needs every member's plan; a run that
covers only part of a fleet leaves its router alone and says so (a partial list would remove
the workers of the members left out).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gpunode.engine import TargetRecap, run_target
from gpunode.engine.events import Emit
from gpunode.engine.lock import Owner
from gpunode.errors import InventoryError
from gpunode.fleet import endpoint


def every_target(inv: Any, overrides: dict[str, Any]) -> list[Any]:
    from gpunode import roles

    defaults = roles.defaults()
    return [inv.target(h, vmid, overrides, defaults) for h, vmid in inv.all_targets()]


def router_target(every: list[Any], fleet: endpoint.Fleet, member: Any) -> Any:
    found = next((t for t in every if t.name == fleet.router), None)
    if found is None:
        raise InventoryError(f"fleet_router: {fleet.router} names no target of the inventory", target=member.name,
                             hint="name a host or host/vmid of the inventory "
                             f"(at {member.origins.get('fleet_router')})")
    return found


def check_members(targets: Sequence[Any], every: list[Any]) -> None:
    """Refuse a fleet the router could not reach, before any target changes."""
    from gpunode.fleet import prechecks

    fleets = endpoint.fleets(every)
    prechecks.fleet(targets, every)
    for t in targets:
        name = str(t.vars.get("fleet_router") or "")
        if name and not t.vars.get("fleet_router_only"):
            router = router_target(every, fleets[name], t)
            endpoint.address_of(router)
            endpoint.reachable(t)
            endpoint.client_key(router, [m for m in every if m.name in fleets[name].members])


def check_router_only(targets: Sequence[Any], every: Callable[[], list[Any]]) -> None:
    """Refuse a run that selects a target holding only a fleet router without its fleet's members: its
    run is built from their plans (provision_fleets), so it would change nothing and exit 0, and a changed
    fleet_router_api_key (a key rotation, docs/fleet.md) would silently not reach the router."""
    alone = [t for t in targets if t.vars.get("fleet_router_only")]
    if not alone:
        return
    chosen = {t.name for t in targets}
    whole = every()
    for t in alone:
        for fleet in endpoint.fleets(whole).values():
            member = next((m for m in whole if m.name == fleet.members[0]), None)
            if member is None or router_target(whole, fleet, member).name != t.name:
                continue
            missing = [m for m in fleet.members if m not in chosen]
            if missing:
                raise InventoryError(f"{t.name} holds only the fleet router of {', '.join(fleet.members)}, whose "
                                     f"run is built from theirs: without {', '.join(missing)} this run would "
                                     "change nothing", target=t.name,
                                     hint="provision the fleet's group (e.g. --group NAME), or select every "
                                     "member with it (-l): the members' runs change nothing of theirs")


def member_routes(targets: Sequence[Any], every: list[Any]) -> dict[str, endpoint.MemberRoute]:
    """{member: how its servers leave and rejoin the fleet router} for the members among `targets`."""
    fleets = endpoint.fleets(every)
    routes = {}
    for t in targets:
        name = str(t.vars.get("fleet_router") or "")
        if name and not t.vars.get("fleet_router_only"):
            routes[t.name] = endpoint.member_route(t, router_target(every, fleets[name], t))
    return routes


#: The variable the servers role's firewall (roles/servers/firewall.py) reads the router's address from: named
#: here, not imported, as a user role named servers may replace the shipped one.
ROUTER_ADDRESS = "fleet_router_address"


def firewall_sources(targets: Sequence[Any], every: list[Any]) -> list[Any]:
    """The targets, each member with fleet_firewall given its fleet router's address to let in
    (roles/servers/firewall.py): only here is the router's target seen."""
    from dataclasses import replace

    fleets = endpoint.fleets(every)
    out = []
    for t in targets:
        name = str(t.vars.get("fleet_router") or "")
        if t.vars.get("fleet_firewall") and name and not t.vars.get("fleet_router_only"):
            address = endpoint.address_of(router_target(every, fleets[name], t))
            t = replace(t, vars={**t.vars, ROUTER_ADDRESS: address})
        out.append(t)
    return out


def provision_fleets(planners: Sequence[Any], every: list[Any], transport_of: Callable[[Any], Any], *,
                     check: bool, diff: bool, emit: Emit, owner: Owner) -> tuple[list[TargetRecap], list[str]]:
    """The fleet routers of the fleets this run provisioned; (their recaps, notes for the user)."""
    from gpunode.facts.parse import parse
    from gpunode.facts.probe import gather
    from gpunode.fleet import router_role

    planned = {p.target.name: p for p in planners if p.plan is not None}
    recaps: list[TargetRecap] = []
    notes: list[str] = []
    for fleet in endpoint.fleets(every).values():
        ran = [m for m in fleet.members if m in planned]
        if not ran:
            continue
        left = [m for m in fleet.members if m not in planned]
        if left:
            notes.append(f"fleet router on {fleet.router}: left as it is: this run did not provision "
                         f"{', '.join(left)} (provision the whole fleet to change its workers)")
            continue
        router = router_target(every, fleet, planned[ran[0]].target)
        workers = [w for m in fleet.members for w in endpoint.workers(planned[m].target, planned[m].plan)]
        engines = {planned[m].plan.engine for m in fleet.members}
        policy = str(router.vars.get("fleet_router_policy") or ("round_robin" if engines == {"vllm-cpu"}
                                                                 else "cache_aware"))
        transport = transport_of(router)
        facts = planned[router.name].facts if router.name in planned else parse(gather(transport))
        plans = router_role.build(router, facts, workers, policy)
        recaps.append(run_target(transport, plans, check=check, diff=diff, emit=emit, owner=owner))
    return recaps, notes
