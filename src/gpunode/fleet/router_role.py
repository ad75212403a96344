"""The fleet router's own run on its target: RolePlans from its facts and the members' plans.

The steps are the ones gpunode already makes for a target's own router: the base role's
packages and uv, the router venv as the engine role installs it (same path, same pin and lock,
so a target that also has its own router shares the venv), the per-target router's unit
template. What differs is where the workers are (other targets) and how their list changes
(steps/fleet.FleetWorkers, not a restart).
"""

from __future__ import annotations

from typing import Any

from gpunode.engine import RolePlan
from gpunode.errors import InventoryError
from gpunode.fleet import endpoint
from gpunode.resolve.plan import Indexes, Plan, PlannedModel, RouterPlan, Toolkit, Topology
from gpunode.roles.context import RoleContext


def router_plan(kb: Any, facts: Any) -> RouterPlan:
    """The router venv's package, Python and lock for the router's target, from the knowledge base."""
    from gpunode.resolve import locks, versions
    from gpunode.resolve.trail import Trail

    r = kb.routers["sglang-router"]
    found = [v for v in facts.system.pythons if versions.in_range(v, r.python_min, r.python_max)]
    default = facts.system.default_python
    python = versions.major_minor(default if default in found else max(found, key=versions.parse)) if found \
        else versions.major_minor(r.python_max)
    lock = locks.planned(kb.pinset(f"router-{r.id}"), facts.system.arch or "x86_64", python, [r.package], Trail(),
                         "router")
    return RouterPlan(r.package, "", python, ("", "-m", r.module), "", 0, "", (), lock)


def router_only(target: str, kb: Any, rp: RouterPlan) -> Plan:
    """The plan of the fleet router's own run: the router alone, no engine, servers, model or fixes.
    The base role and the engine role's lock check read it as they read any plan (its pin set is the
    router's lock folder, which their messages name)."""
    r = kb.routers["sglang-router"]
    return Plan(target=target, engine="", engine_version="", pinset=f"router-{r.id}", pinset_status="",
                python=rp.python, venv="", packages=(), indexes=Indexes(index_url=""),
                toolkit=Toolkit(None, None, None), env={}, topology=Topology("none", 0, 1, ()), servers=(),
                router=rp, fixes=(), model=PlannedModel("", "", "", None, (), 0, False), decisions=(), warnings=(),
                lock=rp.lock)


def build(router: Any, facts: Any, workers: list[endpoint.Worker], policy: str) -> list[RolePlan]:
    """router: its inventory Target (role defaults layered in); workers: every member's servers."""
    from gpunode import roles
    from gpunode.fleet import keys as fleet_keys
    from gpunode.resolve import choices, load
    from gpunode.roles.venvs import installer as venv_installer
    from gpunode.roles.venvs import interpreter, locking
    from gpunode.steps.files import File, Template
    from gpunode.steps.fleet import FleetWorkers
    from gpunode.steps.systemd import Service
    from gpunode.steps.unitfmt import ExecLine, env_text, exec_line, exec_word, unit_path, unit_text
    from gpunode.steps.venv import Venv

    v = dict(router.vars)
    kb = load.load()
    rp = router_plan(kb, facts)
    ctx = RoleContext(target=router.name, vars=v, facts=facts, plan=router_only(router.name, kb, rp),
                      origins=dict(router.origins))
    venv = f"{str(choices.value(v, 'venv_root')).rstrip('/')}/router"
    wheelhouse = v.get("wheelhouse") or ""
    source: dict[str, Any] = {"no_index": True, "find_links": [wheelhouse]} if wheelhouse else {}
    installer = venv_installer(v)
    module = rp.argv[2]
    install = [Venv(path=venv, python=interpreter(rp.python), requirements=[rp.package], installer=installer,
                    label="router venv", verify=[["python", "-c", "import " + module.split(".")[0]]],
                    **locking(ctx, rp.lock), **source)]
    host, port = endpoint.router_listen(router)
    head, tail = endpoint.router_argv(venv, module, host, port, policy)
    client = str(v.get(endpoint.CLIENT_KEY) or "")
    local = endpoint.local_url(host, port)
    secrets, keyed = fleet_keys.files(client, workers, module, local)
    if client:
        # `python LAUNCH args`: the launch moves the key into argv in memory, and registers the workers
        # with their keys each time the router starts; none goes in $WORKER_URLS without its key.
        head = [head[0], fleet_keys.LAUNCH_FILE, *head[3:]]
    urls = [w.url for w in workers]
    # The env file is what a (re)start reads; changing it restarts nothing (FleetWorkers adds live).
    what = "the fleet router's command line"
    exec_start = f"{exec_line(head, what)} $WORKER_URLS {' '.join(exec_word(a, what) for a in tail)}"
    start_urls = "" if client else " ".join(urls)
    files = [File(path=endpoint.ENV_FILE, content=env_text({"HOME": "/root", "WORKER_URLS": start_urls})),
             File(path=endpoint.WORKERS_FILE, content=endpoint.workers_text(workers)),
             *keyed,
             Template(path=f"/etc/systemd/system/{endpoint.FLEET_UNIT}", template="servers/router.service.j2",
                      # no count of workers here: a node that joins must not change (and restart) the unit
                      vars={"workers": unit_text("a fleet's"), "policy": unit_text(policy, "fleet_router_policy"),
                            "server_units": unit_text(""), "env_file": unit_path(endpoint.ENV_FILE),
                            "secrets_file": secrets.unit_var(),
                            "workdir": unit_path("/var/lib/gpunode"), "exec_start": ExecLine(exec_start)},
                      notify=("daemon-reload", f"restart:{endpoint.FLEET_UNIT}")),
             *fleet_keys.stale(secrets)]
    return [*roles.build(["base"], ctx), RolePlan("fleet-router", [*install, *files]),
            RolePlan("fleet-services", [Service(name=endpoint.FLEET_UNIT, enabled=True, running=True)]),
            RolePlan("fleet-workers", [FleetWorkers(url=endpoint.local_url(host, port), python=f"{venv}/bin/python",
                                                    workers=urls, grace_s=_grace(v),
                                                    keys_file=fleet_keys.KEYS_FILE if client else "")])]


def _grace(v: dict[str, Any]) -> int:
    """How long the router waits for a worker to be ready: the servers role's servers_ready_grace_s,
    whose one default is in roles/servers/defaults.yml (a user's servers role must give it too)."""
    if v.get("servers_ready_grace_s") is None:
        raise InventoryError("the fleet router waits servers_ready_grace_s for its workers, and no role in use "
                             "gives it", hint="give servers_ready_grace_s in the servers role's defaults.yml "
                             "or the inventory")
    return int(v["servers_ready_grace_s"])
