"""engine: the resolved pin set in its own venv, verified; the router in its venv."""

from __future__ import annotations

from gpunode.engine import RolePlan
from gpunode.errors import InventoryError
from gpunode.resolve.actions import PipInstall, PipUninstall
from gpunode.resolve.plan import PlannedLock
from gpunode.roles.context import RoleContext
from gpunode.steps.base import Step
from gpunode.steps.venv import Venv

from .verify import installer as venv_installer
from .verify import verify_commands

# Where this role runs (docs/extending.md): `--only engine` checks base is in place first.
DEPENDS = ("base",)


def packages(ctx: RoleContext, phase: str, kind: type[PipInstall | PipUninstall]) -> list[str]:
    """The packages the plan's fixes install or uninstall in this phase."""
    return [p for f in ctx.plan.fixes if f.phase == phase for a in f.actions if isinstance(a, kind)
            for p in a.packages]


def interpreter(version: str) -> str:
    """The plan names a Python version ("3.11"); the venv is made by that interpreter."""
    return f"python{version}" if version and version[0].isdigit() else (version or "python3")


def locking(ctx: RoleContext, lock: PlannedLock | None) -> dict:
    """The plan's full lock for this venv, when there is one and engine_lock allows it."""
    mode = str(ctx.vars.get("engine_lock", "auto"))
    if mode not in ("auto", "required", "off"):
        raise InventoryError(f"{ctx.target}: engine_lock={mode!r} is not one of auto, required, off",
                             hint="auto uses the lock when there is one; required refuses without; off never locks")
    if mode == "off":
        return {"unlocked_why": "engine_lock=off"}
    if lock is None or not lock.file:
        why = lock.unlocked_why if lock else "the plan names no lock"
        if mode == "required":
            raise InventoryError(f"{ctx.target}: {why}", hint=f"inv pinsets.lock --pinset {ctx.plan.pinset} "
                                 f"--python {ctx.plan.python}, or set engine_lock=auto")
        return {"unlocked_why": why}
    if lock.stale:
        raise InventoryError(f"{ctx.target}: {lock.stale}",
                             hint=f"regenerate it: inv pinsets.lock --pinset {lock.file.split('/')[0]}")
    return {"locked": list(lock.requirements), "lock": f"{lock.file}@{lock.digest}"}


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
