"""inv start / stop / restart (one server, the router, or all of a target's; a group one target
after the other) with the readiness wait, and inv teardown."""

from __future__ import annotations

import json as jsonlib
import sys

from invoke import Exit

from gpunode.cli.common import parse_int, task
from gpunode.cli.fleet import TARGET_HELP, say, targets_of

CONTROL_HELP = {**TARGET_HELP, "server": "only this server (cpu0, gpu3; inv status lists them)",
                "router": "only the router", "grace": "seconds to wait for readiness (default: servers_ready_grace_s)"}


def _control(action: str, host, ct, group, server, router, json, inventory, set_, grace, limit) -> None:
    from gpunode.cli.session import Session
    from gpunode.engine import DEFAULT_STATE_DIR
    from gpunode.engine.lock import Owner
    from gpunode.engine.runner import new_run_id
    from gpunode.fleet import control, gather, status
    from gpunode.secrets import redact
    from gpunode.steps.secretfiles import curl_auth

    targets = targets_of(inventory, host, ct, group, set_, limit)
    owner = Owner.current(new_run_id())
    with Session() as session:
        for target in targets:  # one after the other: a group restart never takes every node down at once
            transport = session.transport(target)
            auth = curl_auth(str(target.vars.get("server_api_key") or ""))
            fleet_auth = curl_auth(str(target.vars.get("fleet_router_api_key") or ""))
            report = status.parse(target.name, gather.gather(transport, auth, sample=0, fleet_auth=fleet_auth))
            units = control.select(report, server, router)
            wait = parse_int(grace if grace is not None else servers_var(target, "servers_ready_grace_s"),
                             "--grace", 1, 86400, "e.g. --grace 600")
            if not json:
                say(f"{target.name}: {action} {', '.join(u.name for u in units)}"
                    + (" and wait until ready" if action != "stop" else ""))
            done = control.act(transport, report, action, units, owner, DEFAULT_STATE_DIR, wait, auth)
            if json:
                say(redact(jsonlib.dumps({"type": action, **done.__dict__})))
            else:
                states = ", ".join(f"{u.removeprefix('gpunode-').removesuffix('.service')} {s}"
                                   for u, s in done.states.items())
                say(f"{target.name}: {states}" + (f"; ready: {', '.join(done.ready)}" if done.ready else ""))


@task(iterable=["set_"], help=CONTROL_HELP)
def start(c, host=None, ct=None, group=None, server=None, router=False, json=False, inventory=None, set_=None,
          grace=None, limit=None):
    """Start servers (and the router), then wait until each answers a real completion."""
    _control("start", host, ct, group, server, router, json, inventory, set_, grace, limit)


@task(iterable=["set_"], help=CONTROL_HELP)
def stop(c, host=None, ct=None, group=None, server=None, router=False, json=False, inventory=None, set_=None,
         grace=None, limit=None):
    """Stop servers (and the router); they stay installed and enabled (they start again at boot)."""
    _control("stop", host, ct, group, server, router, json, inventory, set_, grace, limit)


@task(iterable=["set_"], help=CONTROL_HELP)
def restart(c, host=None, ct=None, group=None, server=None, router=False, json=False, inventory=None, set_=None,
            grace=None, limit=None):
    """Restart servers (and the router), then wait until each answers a real completion."""
    _control("restart", host, ct, group, server, router, json, inventory, set_, grace, limit)


@task(iterable=["set_"], help={**TARGET_HELP, "check": "list what would be removed; change nothing",
                               "yes": "do not ask for the typed confirmation",
                               "purge": "also remove /var/lib/gpunode (the journal inv history reads, the lock) "
                                        "and the JIT cache /var/cache/gpunode (the next first start compiles again)"})
def teardown(c, host=None, ct=None, group=None, check=False, yes=False, purge=False, json=False, inventory=None,
             set_=None, limit=None):
    """Remove what gpunode installed: units, env and secrets files, venvs, staged weights (journal, JIT cache stay)."""
    from gpunode import roles
    from gpunode.cli.session import Session
    from gpunode.engine import DEFAULT_STATE_DIR
    from gpunode.engine.lock import Owner
    from gpunode.engine.runner import new_run_id
    from gpunode.errors import InventoryError
    from gpunode.fleet import teardown as td
    from gpunode.resolve import choices

    targets = targets_of(inventory, host, ct, group, set_, limit)
    owner = Owner.current(new_run_id())
    left_over: list[str] = []
    with Session() as session:
        for target in targets:
            transport = session.transport(target)
            root = str(choices.value(target.vars, "weights_dest_root"))
            removal = td.plan(transport, root, DEFAULT_STATE_DIR, purge, str(choices.value(target.vars, "venv_root")),
                              roles.removals(target.vars))
            if json and check:
                say(jsonlib.dumps({"type": "teardown", "check": True, **removal.to_dict()}))
                continue
            if removal.empty:
                say(f"{target.name}: nothing of gpunode's is installed")
                continue
            say("\n".join([f"{target.name}: {'would remove' if check else 'to remove'}:",
                           *[f"  {line}" for line in removal.lines()]]))
            if check:
                continue
            if not yes:
                if not sys.stdin.isatty():
                    raise InventoryError("teardown asks for a typed confirmation, and stdin is not a terminal",
                                         target=target.name, hint="pass --yes (after --check shows the list)")
                typed = input(f"type the target's name ({target.name}) to remove all of this: ").strip()
                if typed != target.name:
                    raise Exit(f"{target.name}: not confirmed ({typed!r} is not {target.name!r}); nothing removed",
                               code=1)
            left = td.apply(transport, removal, owner, DEFAULT_STATE_DIR, purge)
            left_over += [f"{target.name}:{p}" for p in left]
            if json:
                say(jsonlib.dumps({"type": "teardown", "check": False, **removal.to_dict(), "left": left}))
            else:
                say(f"{target.name}: removed" + (f"; still there: {', '.join(left)}" if left else "")
                    + ("" if purge else f"; the journal stays in {DEFAULT_STATE_DIR} and the JIT cache in "
                       f"{td.CACHE} (--purge removes both)"))
    if left_over:
        raise Exit(f"not removed: {', '.join(left_over)}", code=1)


@task(iterable=["set_"], help={**TARGET_HELP, "to": "this generation (inv history lists them; default: the one "
                                                    "live before the live one)",
                               "grace": "seconds each server may take to pass Ready (default: servers_ready_grace_s)"})
def rollback(c, host=None, ct=None, group=None, to=None, json=False, inventory=None, set_=None, grace=None, limit=None):
    """Go back one generation: the kept unit and env files (and so the venv they name) back in place, each
    changed server replaced behind the router one at a time, the router last (docs/upgrade.md)."""
    from gpunode.cli.common import load_inventory, parse_sets, select_targets
    from gpunode.cli.session import Session
    from gpunode.engine import DEFAULT_STATE_DIR
    from gpunode.engine.lock import Owner
    from gpunode.engine.runner import new_run_id
    from gpunode.fleet import gather, generations, status
    from gpunode.fleet import provision as fleet
    from gpunode.secrets import redact
    from gpunode.steps.secretfiles import curl_auth

    inv, sets = load_inventory(inventory), parse_sets(set_)
    targets = select_targets(inv, host, ct, group, sets, limit)
    # A fleet member's servers leave the fleet router too while each is replaced, as in a rollout.
    every = fleet.every_target(inv, sets) if any(t.vars.get("fleet_router") for t in targets) else []
    routes = fleet.member_routes(targets, every) if every else {}
    owner = Owner.current(new_run_id())
    with Session() as session:
        for target in targets:  # one after the other, as inv restart
            transport = session.transport(target)
            key = str(target.vars.get("server_api_key") or "")
            fleet_auth = curl_auth(str(target.vars.get("fleet_router_api_key") or ""))
            report = status.parse(target.name, gather.gather(transport, curl_auth(key), sample=0,
                                                             fleet_auth=fleet_auth))
            wait = parse_int(grace if grace is not None else servers_var(target, "servers_ready_grace_s"),
                             "--grace", 1, 86400, "e.g. --grace 600")
            drain = parse_int(servers_var(target, "servers_drain_s"), "servers_drain_s", 0, 86400, "e.g. 300")
            name, said = generations.rollback(transport, report, owner, DEFAULT_STATE_DIR, to=to or "", key=key,
                                              drain_s=drain, ready_s=wait, fleet=routes.get(target.name))
            if json:
                say(redact(jsonlib.dumps({"type": "rollback", "target": target.name, "generation": name,
                                          "said": said})))
            else:
                say(f"{target.name}: back to generation {name}")
                say("\n".join(f"  {x[2:]}" for x in said if x.startswith(("@@replaced", "@@back"))))


ns = [start, stop, restart, teardown, rollback]


def servers_var(target, name: str):
    """A servers role's variable, its default from that role's defaults.yml (the one place it is
    written): a user's servers role that replaced the shipped one may not give it."""
    from gpunode.errors import InventoryError

    if target.vars.get(name) is None:
        raise InventoryError(f"{target.name}: {name} is not given, and the servers role in use has no default for it",
                             target=target.name, hint=f"give {name} in the inventory or your servers role's "
                             "defaults.yml")
    return target.vars[name]
