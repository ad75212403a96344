"""engine: the resolved pin set in its own venv, verified; the router in its venv."""

from __future__ import annotations

from gpunode.engine import RolePlan
from gpunode.resolve.actions import PipInstall, PipUninstall
from gpunode.roles.context import RoleContext
from gpunode.roles.venvs import installer as venv_installer
from gpunode.roles.venvs import interpreter, locking
from gpunode.steps.base import Step
from gpunode.steps.venv import Venv

from .verify import verify_commands

# Where this role runs (docs/extending.md): `--only engine` checks base is in place first.
DEPENDS = ("base",)


def packages(ctx: RoleContext, phase: str, kind: type[PipInstall | PipUninstall]) -> list[str]:
    """The packages the plan's fixes install or uninstall in this phase."""
    return [p for f in ctx.plan.fixes if f.phase == phase for a in f.actions if isinstance(a, kind)
            for p in a.packages]


def build(ctx: RoleContext) -> list[RolePlan]:
    v, plan = ctx.vars, ctx.plan
    wheelhouse = v.get("wheelhouse") or ""
    source = ({"no_index": True, "find_links": [wheelhouse]} if wheelhouse else
              {"index_url": plan.indexes.index_url, "extra_index_urls": list(plan.indexes.extra_index_urls)})
    requirements = [p.requirement for p in plan.packages]
    requirements += packages(ctx, "install", PipInstall)
    requirements = list(dict.fromkeys(requirements))  # pip-nvcc repeats pins that CUDA 13 pin sets already list
    replace = packages(ctx, "before_install", PipUninstall)
    remove = packages(ctx, "after_install", PipUninstall)
    installer = venv_installer(v)
    steps: list[Step] = [
             Venv(path=plan.venv, python=interpreter(plan.python), requirements=requirements, replace=replace,
                  remove_after=remove, verify=verify_commands(ctx, requirements), installer=installer,
                  timeout=float(v["engine_install_timeout"]), label=f"engine venv ({plan.pinset})",
                  on_progress=ctx.progress_for("engine", "packages"), on_line=ctx.output,
                  **locking(ctx, plan.lock), **source)]
    if plan.router is not None and v.get("servers_router", True):
        steps.append(Venv(path=plan.router.venv, python=interpreter(plan.router.python),
                          requirements=[plan.router.package], installer=installer, label="router venv",
                          on_progress=ctx.progress_for("engine", "packages"), on_line=ctx.output,
                          verify=[["python", "-c", "import " + plan.router.argv[2].split(".")[0]]]
                          if len(plan.router.argv) > 2 and plan.router.argv[1] == "-m" else [],
                          **locking(ctx, plan.router.lock), **source))
    return [RolePlan("engine", steps)]
