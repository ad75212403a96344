"""servers: env files and units per server, the router, the boot-time staging unit, readiness."""

from __future__ import annotations

import json
from dataclasses import dataclass

from gpunode import listen
from gpunode.engine import RolePlan
from gpunode.errors import InventoryError
from gpunode.listen import flag_value
from gpunode.roles.context import RoleContext
from gpunode.steps.files import File
from gpunode.steps.health import Endpoint, Ready
from gpunode.steps.judge import EngineJudge, Judged
from gpunode.steps.rolling import Keep, Rolled, RollingRestart, Route
from gpunode.steps.secretfiles import curl_auth, router_home, server_home, stale
from gpunode.steps.systemd import Service, UnitTemplate
from gpunode.steps.unitfmt import env_text, exec_line, unit_path, unit_seconds, unit_text, unit_words
from gpunode.steps.weights import STAGE_SCRIPT, stage_args

from . import firewall

# Where this role runs (docs/extending.md): the servers start from the engine venv, the fixes and the
# staged weights.
DEPENDS = ("engine", "cuda_fixes", "weights")

UNIT_DIR = "/etc/systemd/system"
STAGE_UNIT = "gpunode-stage-weights.service"
ROUTER_UNIT = "gpunode-router.service"


@dataclass(frozen=True)
class Server:
    name: str          # "gpu0", "slot1"
    device: str        # "GPU 0" / "CPU core 1"
    port: int
    argv: list[str]    # full command line
    env: dict[str, str]
    cpu_affinity: str = ""
    serves_http: bool = True   # a multi-node server's other ranks serve no HTTP: readiness waits on the head

    @property
    def unit(self) -> str:
        return f"gpunode-{self.name}.service"


def unit_name(name: str) -> str:
    return f"gpunode-{name}.service"


def servers_from_plan(ctx: RoleContext) -> list[Server]:
    out = []
    for s in ctx.plan.servers:
        env = ctx.plan.server_env(s)
        cores = env.get("VLLM_CPU_OMP_THREADS_BIND", "")
        device = f"GPU {','.join(map(str, s.gpus))}" if s.gpus else f"CPU core {cores or '?'}"
        if env.get("CUDA_VISIBLE_DEVICES", "").startswith("MIG-"):   # one MIG device of that GPU
            device += f" {env['CUDA_VISIBLE_DEVICES']}"
        out.append(Server(name=s.name, device=device, port=s.port, argv=list(s.argv), env=env,
                          cpu_affinity=cores if not s.gpus else "", serves_http=s.serves_http))
    return out


def check_ports(ctx: RoleContext, servers: list[Server]) -> None:
    """base_port is typed alone (1..65535); here it meets the number of servers the plan made."""
    if servers and max(s.port for s in servers) > 65535:
        start = min(s.port for s in servers)
        raise InventoryError(f"base_port={ctx.vars.get('base_port', start)} gives {len(servers)} servers the ports "
                             f"{start}..{max(s.port for s in servers)}, beyond the last port 65535",
                             target=ctx.target, hint=f"set base_port to {65536 - len(servers)} or lower "
                             f"(at {ctx.where('base_port')})")


def judge(ctx: RoleContext) -> EngineJudge:
    """The engine in the plan's venv judges every server's arguments and environment, before any of
    this role's files is written (steps/judge.py). The API key's file is left out: it holds no flag
    a check reads, and a secret stays out of the probe."""
    plan = ctx.plan
    return EngineJudge(engine=plan.engine, venv=plan.venv,
                       servers=[Judged(s.name, tuple(s.args), tuple(sorted(plan.server_env(s).items())))
                                for s in plan.servers],
                       expect=[json.dumps(p.requirement) for p in plan.packages],
                       timeout=float(ctx.vars["servers_judge_timeout"]))


def build(ctx: RoleContext) -> list[RolePlan]:
    v = ctx.vars
    servers = servers_from_plan(ctx)
    check_ports(ctx, servers)
    model = ctx.plan.model.served_model_name
    key = str(v.get("server_api_key") or "")
    # The engine's judge first; then the firewall, so that a port it closes is closed before a server
    # listens on it; then the servers' files (the generation keeps only these).
    head: list = [judge(ctx)] if v["servers_judge"] and ctx.plan.servers else []
    head += firewall.steps(ctx)
    steps: list = []
    w = ctx.plan.weights
    stage = STAGE_UNIT if w is not None and w.stage else ""
    if w is not None and stage:
        # /dev/shm is empty after a reboot: this unit copies the weights again before the servers start
        steps.append(UnitTemplate(path=f"{UNIT_DIR}/{STAGE_UNIT}", template="servers/stage-weights.service.j2",
                              vars={"source": unit_text(w.source, "model_source"),
                                    "dest": unit_text(w.dest, "weights_dest_root"),
                                    "mount": unit_path(w.source, "model_source", word=True),
                                    "exec_start": exec_line(["/bin/sh", STAGE_SCRIPT,
                                                             *stage_args(w.source, w.dest, w.skip)],
                                                            "model_source")},
                              notify=("daemon-reload",)))
    for s in servers:
        env_file = f"/etc/gpunode/{s.name}.env"
        steps.append(File(path=env_file, content=env_text(s.env), notify=(f"restart:{s.unit}",)))
        home = server_home(ctx.plan.engine, s.name, s.unit, key)
        if home.file:
            steps.append(home.file)
        steps.append(UnitTemplate(path=f"{UNIT_DIR}/{s.unit}", template="servers/server.service.j2",
                              vars={"engine": unit_text(ctx.plan.engine, "engine"), "name": unit_text(s.name),
                                    "device": unit_text(s.device, "gpus"), "stage_unit": unit_text(stage),
                                    "env_file": unit_path(env_file), "workdir": unit_path("/var/lib/gpunode"),
                                    "secrets_file": home.unit_var(),
                                    "exec_start": exec_line([*s.argv, *home.extra_argv],
                                                            f"the command line of {s.name}"),
                                    "cpu_affinity": unit_text(s.cpu_affinity, "slot_cores"),
                                    "start_timeout": unit_seconds(v["servers_start_timeout"],
                                                                  "servers_start_timeout")},
                              notify=("daemon-reload", f"restart:{s.unit}")))
        steps += stale(s.name, home)  # after the unit that no longer reads them
    endpoints = [Endpoint(s.name, s.unit, listen.url(flag_value(s.argv, "--host") or "127.0.0.1", s.port), model)
                 for s in servers if s.serves_http]
    router = ctx.plan.router if v["servers_router"] else None
    if router is not None:
        home, argv = router_home(list(router.argv), ROUTER_UNIT, key)
        steps.append(File(path="/etc/gpunode/router.env", content=env_text({"HOME": "/root"}),
                          notify=(f"restart:{ROUTER_UNIT}",)))
        if home.file:
            steps.append(home.file)
        steps.append(UnitTemplate(path=f"{UNIT_DIR}/{ROUTER_UNIT}", template="servers/router.service.j2",
                              vars={"workers": len(servers),
                                    "policy": unit_text(router.policy, "router_policy"),
                                    "server_units": unit_words([s.unit for s in servers]),
                                    "env_file": unit_path("/etc/gpunode/router.env"),
                                    "secrets_file": home.unit_var(),
                                    "workdir": unit_path("/var/lib/gpunode"),
                                    "exec_start": exec_line(argv, "the router's command line")},
                              notify=("daemon-reload", f"restart:{ROUTER_UNIT}")))
        steps += stale("router", home)
        endpoints.append(Endpoint("router", ROUTER_UNIT, listen.url(router.host, router.port), model, "/readiness"))
    plans = [RolePlan("servers", [*head, *steps], rolling(ctx, servers, model, key) if v["servers_enabled"] else {})]
    if v["servers_enabled"]:
        # A separate role, so that its steps run after the unit files' handlers: a changed
        # unit is restarted once (restart starts a stopped unit), never started then restarted.
        units = ([stage] if stage else []) + [s.unit for s in servers] + ([ROUTER_UNIT] if router is not None else [])
        plans.append(RolePlan("services", [Service(name=u, enabled=True, running=True) for u in units]))
        if endpoints:
            plans.append(RolePlan("ready", [Ready(endpoints=endpoints, grace_s=int(v["servers_ready_grace_s"]),
                                                  auth=curl_auth(key),
                                                  on_progress=ctx.progress_for("ready", "servers"),
                                                  on_line=ctx.output), keep(ctx, steps)]))
    return plans


def rolling(ctx: RoleContext, servers: list[Server], model: str, key: str) -> dict:
    """Each HTTP server's restart replaces it behind the router, one at a time, in server order (the
    role's own handlers run in declaration order, engine/handlers.ordered); the router's own restart
    stays systemctl's, after them."""
    router = ctx.plan.router if ctx.vars["servers_router"] else None
    fleet = ctx.fleet  # a fleet member: out of the fleet router too, which sends the server its own key
    routed = {s.name: ((Route(listen.url(router.host, router.port), router.worker_urls[i]),) if router else ())
              + ((Route(fleet.router, f"http://{fleet.host}:{s.port}", fleet.key, key),) if fleet else ())
              for i, s in enumerate(servers)}
    rolled = tuple(Rolled(s.unit, listen.url(flag_value(s.argv, "--host") or "127.0.0.1", s.port), model,
                          routed[s.name])
                   for s in servers if s.serves_http)
    python = f"{ctx.plan.venv.rstrip('/')}/bin/python"
    return {f"restart:{r.unit}": RollingRestart(f"restart:{r.unit}", r.unit, python, rolled,
                                                drain_s=int(ctx.vars["servers_drain_s"]),
                                                ready_s=int(ctx.vars["servers_ready_grace_s"]), key=key)
            for r in rolled}


def keep(ctx: RoleContext, steps: list) -> Keep:
    """The files this role writes, recorded as a generation once Ready passed."""
    files = {s.path: ("sensitive" if s.sensitive else s.sha256) for s in steps if isinstance(s, File)}
    return Keep(files=files, meta={"pinset": ctx.plan.pinset, "engine": ctx.plan.engine, "venv": ctx.plan.venv})
