"""How roles read the resolver's plan: servers, router and the served model name."""

from __future__ import annotations

import posixpath

from gpunode.roles.context import RoleContext
from gpunode.roles.cuda_fixes.role import jit_env


def served_model_name(ctx: RoleContext) -> str:
    args = ctx.plan.servers[0].args if ctx.plan.servers else ()
    for flag in ("--served-model-name",):
        if flag in args:
            return args[args.index(flag) + 1]
    return ctx.vars.get("served_model_name") or posixpath.basename(str(ctx.plan.model.get("path", "model")))


def servers(ctx: RoleContext, model_path: str) -> list:
    from gpunode.roles.servers.role import Server

    out = []
    cache = ctx.vars["cuda_jit_cache"]
    for s in ctx.plan.servers:
        env = {**jit_env(cache), **ctx.plan.env, **s.env, "PORT": str(s.port)}
        if s.cuda_visible_devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = s.cuda_visible_devices
        cores = env.get("VLLM_CPU_OMP_THREADS_BIND", "")
        device = f"GPU {','.join(map(str, s.gpus))}" if s.gpus else f"CPU core {cores or '?'}"
        out.append(Server(name=s.name, device=device, port=s.port, argv=list(s.argv), env=env,
                          cpu_affinity=cores if not s.gpus else "", serves_http=s.serves_http))
    return out


def router_argv(ctx: RoleContext, servers: list) -> tuple[list[str], int, dict[str, str]] | None:
    r = ctx.plan.router
    if r is None:
        return None
    return list(r.argv), r.port, {"HOME": "/root"}
