"""`inv start` / `inv stop` / `inv restart`: systemctl on the units status found, under the
target's lock (a provision run cannot interleave), recorded in the target's journal (so
`inv history` shows who stopped what), then the readiness wait of provision's health step
(every /health, then one real completion through each endpoint)."""

from __future__ import annotations

from dataclasses import dataclass

from gpunode import listen
from gpunode.engine import journal, lock
from gpunode.engine.lock import Owner
from gpunode.errors import InventoryError, StepError, tail
from gpunode.fleet.status import Report, Unit
from gpunode.listen import flag_value
from gpunode.steps.health import Endpoint, Ready, router_admits
from gpunode.transport.base import Transport

ACTIONS = ("start", "stop", "restart")


@dataclass
class Done:
    target: str
    action: str
    units: list[str]
    states: dict[str, str]   # unit -> ActiveState afterwards
    ready: list[str]         # endpoints that answered a completion (start/restart)


def select(report: Report, server: str | None, router: bool) -> list[Unit]:
    """The units an action is for: one server, the router, or every server and the router."""
    if server and router:
        raise InventoryError("give --server NAME or --router, not both", hint="or neither: every server and the router")
    served = [u for u in report.units if u.kind in ("server", "router")]
    if server:
        found = [u for u in served if u.name == server and u.kind == "server"]
        if not found:
            names = ", ".join(u.name for u in served if u.kind == "server") or "none"
            raise InventoryError(f"no server {server!r} is installed on {report.target}", target=report.target,
                                 hint=f"servers there: {names} (inv status lists them)")
        return found
    if router:
        found = [u for u in served if u.kind == "router"]
        if not found:
            raise InventoryError(f"no router is installed on {report.target}", target=report.target,
                                 hint="a plan with one server has no router")
        return found
    if not served:
        raise InventoryError(f"no gpunode servers are installed on {report.target}", target=report.target,
                             hint="run inv provision first")
    return served


def endpoints(report: Report, units: list[Unit]) -> list[Endpoint]:
    """What to wait for: each chosen unit with a port, servers first; the router's completion
    asks for the model its servers serve."""
    model = next((u.model for u in report.units if u.kind == "server" and u.model), "")
    out = []
    for u in sorted(units, key=lambda x: x.kind == "router"):
        if u.port is None:
            continue
        health = "/readiness" if u.kind == "router" else "/health"
        out.append(Endpoint(u.name, u.id, _url(u), u.model or model, health))
    return out


_STATES = r"""for u; do printf '%s %s\n' "$u" "$(systemctl show -P ActiveState "$u")"; done"""


def _router_admits(target: Transport, report: Report, units: list[Unit], grace_s: int, auth: str) -> None:
    # The router admits a (re)started worker only after its own health check: until then
    # `inv status` would call it unhealthy.
    router = next((u for u in report.units if u.kind == "router" and u.port), None)
    urls = [_url(u) for u in units if u.kind == "server" and u.port]
    if router is not None and router.port and urls:
        router_admits(target, _url(router), urls, grace_s, auth)


def _url(unit: Unit) -> str:
    """Where this machine reaches a unit: its command line's --host (listen.py)."""
    return listen.url(flag_value(unit.argv, "--host") or "127.0.0.1", unit.port or 0)


def act(target: Transport, report: Report, action: str, units: list[Unit], owner: Owner, state_dir: str,
        grace_s: int, auth: str = "") -> Done:
    if action not in ACTIONS:
        raise InventoryError(f"unknown action {action!r}", hint="start, stop or restart")
    ids = [u.id for u in units]
    waits = endpoints(report, units) if action != "stop" else []
    by = f"{owner.user}@{owner.workstation}"
    with lock.acquire(target, state_dir, owner):
        # journal first: a run cut off after systemctl still shows who asked for it
        journal.update(target, state_dir, owner.run_id, entries=[
            journal.Entry(owner.run_id, by, "fleet", "step", f"{action}:{i}", f"{action} by inv {action}")
            for i in ids])
        result = target.run(["systemctl", action, *ids], timeout=600)
        if not result.ok:
            why = target.run(["journalctl", "-u", ids[0], "-n", "20", "--no-pager", "-o", "cat"]).stdout
            raise StepError(f"systemctl {action} {' '.join(ids)} failed with exit code {result.exit_code}",
                            target=target.name, evidence=tail(result.stderr + "\n" + why, 25),
                            hint=f"inv logs --server {units[0].name} shows the whole journal")
        if waits:
            Ready(endpoints=waits, grace_s=grace_s, auth=auth).apply(target)
            _router_admits(target, report, units, grace_s, auth)
        states = dict(line.split(" ", 1) for line in
                      target.run(["sh", "-c", _STATES, "sh", *ids]).stdout.splitlines() if " " in line)
    if action == "stop":
        still = [u for u, s in states.items() if s not in ("inactive", "failed")]
        if still:
            raise StepError(f"still running after systemctl stop: {', '.join(still)}", target=target.name,
                            hint="inv logs shows why it did not stop")
    return Done(target.name, action, ids, states, [e.name for e in waits])
