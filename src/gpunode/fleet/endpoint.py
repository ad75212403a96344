"""The fleet endpoint: one sglang-router whose workers are every server of a group (issue 31).

A target whose variables say `fleet_router: NAME` (set on a group, or on single targets) is a
member of the fleet whose router runs on target NAME. After every target of a run is
provisioned, the router's target gets its own small run (cli/provision.py, pipeline.provision_fleets):
uv and the router venv (as the base and engine roles make them), `gpunode-fleet-router.service`
from the per-target router's template, and the FleetWorkers step, which adds and removes
workers over the router's HTTP API. The worker list also goes into an env file the unit reads
at start, which notifies no restart: a node added to the group is added to the running router,
and neither the router nor the other nodes' servers restart.

Everything here is pure: targets, plans and facts in, RolePlans out.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpunode import listen
from gpunode.errors import InventoryError
from gpunode.inventory import Target

if TYPE_CHECKING:  # `gpunode status` imports this module for the client key's path: the resolver stays out
    from gpunode.resolve.plan import Plan

FLEET_UNIT = "gpunode-fleet-router.service"
ENV_FILE = "/etc/gpunode/fleet-router.env"
WORKERS_FILE = "/etc/gpunode/fleet-router.workers"  # url target server, for `inv status`
METRICS_PORT = 29100  # beside the per-target router's 29000, on loopback
WILDCARD = ("0.0.0.0", "::")


@dataclass(frozen=True)
class Worker:
    url: str
    target: str
    server: str
    key: str = field(default="", repr=False)  # the server's --api-key, which the router sends it


CLIENT_KEY = "fleet_router_api_key"  # the key clients give the fleet router (its own --api-key)
#: fleet_router_port's one default (the fleet's variables are typed in fleet/types.yml; docs/variables.md)
ROUTER_PORT = 30100
DEFAULTS = {"fleet_router_port": ROUTER_PORT}


@dataclass(frozen=True)
class MemberRoute:
    """How a member's server leaves the fleet router and goes back in while it is replaced
    (steps/rolling.py, issue 39): the other members keep serving through the router meanwhile."""

    router: str   # the fleet router's URL as the member reaches it
    host: str     # the host part of the member's servers' URLs as the router lists them
    key: str = field(default="", repr=False)  # the router's clients' key: its worker API takes it too


def member_route(member: Any, router: Any) -> MemberRoute:
    host, port = router_listen(router)
    if host in WILDCARD:  # listening everywhere: the members reach it at its fleet address
        host = address_of(router)
    return MemberRoute(listen.url(host, port), reachable(member), str(router.vars.get(CLIENT_KEY) or ""))


@dataclass(frozen=True)
class Fleet:
    router: str                 # the target the router runs on
    members: tuple[str, ...]    # every inventory target that names it, sorted


def fleets(targets: list[Any]) -> dict[str, Fleet]:
    """{router target: Fleet} over every inventory target (not only those of this run)."""
    by_router: dict[str, list[str]] = {}
    for t in targets:
        name = str(t.vars.get("fleet_router") or "")
        if name and not t.vars.get("fleet_router_only"):  # the router's own target, in the group too
            by_router.setdefault(name, []).append(t.name)
    return {r: Fleet(r, tuple(sorted(m))) for r, m in sorted(by_router.items())}


def address_of(target: Any) -> str:
    """Where other targets reach this one: fleet_address, else a plain SSH host's address."""
    given = str(target.vars.get("fleet_address") or "")
    if given:
        return _plain_address(target, given)
    if target.container is None:
        return str(target.host.address)
    raise InventoryError(f"{target.name} is in a fleet but has no fleet_address: a container's address is not in "
                         "the inventory", target=target.name,
                         hint=f"set fleet_address: <the address other nodes reach {target.name} at> on it "
                         f"({target.origins.get('fleet_router', 'the inventory')})")


def _plain_address(target: Any, given: str) -> str:
    """An IP address or a host name: a port, a scheme or a path would be pasted into every worker URL."""
    try:
        return str(ipaddress.ip_address(given.strip("[]")))
    except ValueError:
        pass
    if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252})", given):
        raise InventoryError(f"{target.name}: fleet_address {given[:80]!r} is not an address or a host name "
                             "(a port, scheme or path does not belong in it)", target=target.name,
                             hint="give the address alone, e.g. fleet_address: 10.0.0.5; the ports are the "
                             "servers' own")
    return given


def workers(member: Target, plan: Plan) -> list[Worker]:
    """The member's servers as the router reaches them; refused when they listen on loopback only."""
    host = reachable(member)
    key = str(member.vars.get("server_api_key") or "")
    return [Worker(f"http://{host}:{s.port}", member.name, s.name, key) for s in plan.servers]


def reachable(member: Target) -> str:
    """The host part of the member's servers' URLs as the router reaches them; refused when they
    listen on loopback only."""
    address = address_of(member)
    listen = str(member.vars.get("host") or address)  # pipeline.target_vars: the fleet address by default
    if listen not in (*WILDCARD, address):
        raise InventoryError(f"{member.name}: its servers listen on host={listen}, which the fleet router on "
                             f"{member.vars['fleet_router']} cannot reach at {address}", target=member.name,
                             hint=f"set host: 0.0.0.0 or host: {address} on {member.name} "
                             f"(at {member.origins.get('host', member.origins.get('fleet_router', 'the inventory'))})")
    return f"[{address}]" if ":" in address else address


def client_key(router: Any, members: list[Any]) -> str:
    """The key clients give the fleet router; refused when the members' servers take keys and the
    router would take requests from anyone: the key the servers had would no longer close them."""
    key = str(router.vars.get(CLIENT_KEY) or "")
    keyed = [m.name for m in members if m.vars.get("server_api_key")]
    if keyed and not key:
        raise InventoryError(f"{router.name}: the fleet router would answer anyone, but its members' servers take "
                             f"an API key ({', '.join(keyed)})", target=router.name,
                             hint=f"set {CLIENT_KEY} on {router.name} (inventory or --set; a secret like "
                             "server_api_key: docs/fleet.md 'Keys')")
    return key


def router_listen(router: Any) -> tuple[str, int]:
    """The fleet router's address and port: fleet_router_host (default: its fleet address)."""
    host = str(router.vars.get("fleet_router_host") or address_of(router))
    return host, int(router.vars.get("fleet_router_port") or ROUTER_PORT)


def local_url(host: str, port: int) -> str:
    """How the router's own target asks it (a wildcard is reached on loopback)."""
    return listen.url(host, port)


def router_argv(venv: str, module: str, host: str, port: int, policy: str) -> tuple[list[str], list[str]]:
    """The command line before and after the worker URLs, which systemd splits out of $WORKER_URLS."""
    head = [f"{venv}/bin/python", "-m", module, "--host", host, "--port", str(port), "--worker-urls"]
    # Health every 5 s with sglang-router's thresholds (3 failures, 2 successes): a lost node is
    # marked unhealthy within ~15 s and re-admitted ~10 s after it answers again (docs/fleet.md).
    tail = ["--policy", policy, "--prometheus-host", "127.0.0.1", "--prometheus-port", str(METRICS_PORT),
            "--health-check-interval-secs", "5", "--worker-startup-check-interval", "2"]
    return head, tail


def workers_text(ws: list[Worker]) -> str:
    return "".join(f"{w.url} {w.target} {w.server}\n" for w in ws)
