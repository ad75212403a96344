"""cuda_fixes: the plan's fixes that act on files, plus persistent JIT caches."""

from __future__ import annotations

from gpunode.engine import RolePlan
from gpunode.errors import InventoryError
from gpunode.resolve.actions import Ldconfig, LibSymlink, Link, OverlayTree, RemoveTree
from gpunode.resolve.choices import value as resolver_var
from gpunode.roles.context import RoleContext
from gpunode.steps.cuda import LibcudaLink
from gpunode.steps.files import Directory, Symlink
from gpunode.steps.trees import Absent, Overlay

# Where this role runs (docs/extending.md): its fixes act on the engine venv.
DEPENDS = ("engine",)

# The other actions are handled elsewhere: pip_* in the engine venv, apt_install in base, env in the
# plan's environment, manual as the plan's warning. The servers' JIT caches point at cuda_jit_cache
# through the plan's env (resolve/toolkit.py jit_env); this role makes the folder.


# Emptied at boot (tmpfs) or by tmpfiles' age rule, or replaced with the venv on an upgrade.
_NOT_KEPT = ("/tmp", "/var/tmp", "/run", "/dev/shm")


def jit_cache(ctx: RoleContext) -> str:
    """cuda_jit_cache, refused where it would not outlive a reboot or an upgrade of the venv."""
    cache = str(resolver_var(ctx.vars, "cuda_jit_cache")).rstrip("/") or "/"
    venvs = str(resolver_var(ctx.vars, "venv_root")).rstrip("/")
    for root, why in [*((r, "emptied at boot or by age") for r in _NOT_KEPT),
                      (venvs, "venv_root: a venv is made again when its pin set changes")]:
        if cache == root or cache.startswith(root + "/"):
            raise InventoryError(f"{ctx.target}: cuda_jit_cache={cache!r} is under {root} ({why}), so the "
                                 "compiled kernels would be lost and the next start would compile them again",
                                 hint="leave the default /var/cache/gpunode/jit or name a folder on a disk "
                                 "that persists, outside venv_root")
    return cache


def build(ctx: RoleContext) -> list[RolePlan]:
    steps: list = [Directory(path=jit_cache(ctx))]
    for fix in ctx.plan.fixes:
        if any(isinstance(a, LibSymlink | Ldconfig) for a in fix.actions):
            steps.append(LibcudaLink(label=f"{fix.id}: libcuda.so"))
        for action in fix.actions:
            if isinstance(action, OverlayTree):
                steps.append(Overlay(dest=action.into, sources=list(action.contents_of),
                                     label=f"{fix.id}: overlay onto {action.into}"))
            elif isinstance(action, Link):
                steps.append(Symlink(path=action.path, target=action.target,
                                     label=f"{fix.id}: {action.path} -> {action.target}"))
            elif isinstance(action, RemoveTree):
                steps.append(Absent(path=action.path, label=f"{fix.id}: remove {action.path}"))
    return [RolePlan("cuda_fixes", steps)]
