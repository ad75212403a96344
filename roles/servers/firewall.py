"""The servers' host firewall (issue 44, docs/fleet.md 'Firewall'): with `fleet_firewall: true`, only the
fleet router's address (and `fleet_firewall_allow`) reaches this target's server ports.

`fleet_router_address` is not the user's to set: `inv provision` reads it off the fleet router's target
(fleet/provision.firewall_sources) before the member's roles are made, as only it sees that target.
"""

from __future__ import annotations

from gpunode.errors import InventoryError, StepError
from gpunode.roles.context import RoleContext
from gpunode.steps.apt import Packages
from gpunode.steps.base import Step
from gpunode.steps.files import File
from gpunode.steps.firewall import RULES, UNIT, NftTable, NoFirewall, ruleset, sources
from gpunode.steps.systemd import Service, UnitTemplate
from gpunode.steps.unitfmt import unit_path, unit_text

ROUTER_ADDRESS = "fleet_router_address"  # set by fleet/provision.firewall_sources, never by the inventory
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def ports(ctx: RoleContext) -> list[int]:
    """The target's server ports, and its own router's where it listens beyond loopback."""
    out = [s.port for s in ctx.plan.servers]
    router = ctx.plan.router if ctx.vars.get("servers_router") else None
    if router is not None and router.host not in LOOPBACK:
        out.append(router.port)
    return out


def steps(ctx: RoleContext) -> list[Step]:
    """The firewall's steps, at the head of the servers role's (its generation keeps none of them: a
    rollback of the servers leaves the firewall as it is)."""
    v = ctx.vars
    if not v.get("fleet_firewall"):
        return [NoFirewall()]
    if v.get("fleet_router") and not v.get(ROUTER_ADDRESS):
        # made by a command that reads plans only (inv bench --fleet): the router's address is only known
        # to a provision run; nothing here, so that nothing is changed or removed on such a plan's word
        return []
    allow = [str(a) for a in [v.get(ROUTER_ADDRESS) or "", *(v.get("fleet_firewall_allow") or [])] if a]
    if not allow:
        raise InventoryError(f"{ctx.target}: fleet_firewall would let nobody reach its servers: it is in no fleet "
                             "(no fleet_router) and fleet_firewall_allow is empty", target=ctx.target,
                             hint=f"set fleet_router on it, or list the addresses in fleet_firewall_allow "
                             f"(at {ctx.where('fleet_firewall')})")
    open_to = ports(ctx)
    if not open_to:
        return [NoFirewall()]
    where = f"{ctx.target}: fleet_firewall_allow (at {ctx.where('fleet_firewall_allow')}) or its fleet router's address"
    try:
        text = ruleset(open_to, allow, where)
    except StepError as bad:  # the inventory's value: refused before anything runs, as a bad variable is
        raise InventoryError(bad.message, target=ctx.target, hint=bad.hint) from None
    v4, v6 = sources(allow, where)
    return [
        Packages(names=["nftables"], on_progress=ctx.progress_for("apt", "percent"), on_line=ctx.output),
        File(path=RULES, content=text),
        UnitTemplate(path=f"/etc/systemd/system/{UNIT}", template="servers/firewall.service.j2",
                     vars={"allowed": unit_text(", ".join(v4 + v6), "fleet_firewall_allow"),
                           "rules": unit_path(RULES)}, notify=("daemon-reload",)),
        Service(name=UNIT, enabled=True, running=True),
        NftTable(content=text),
    ]

