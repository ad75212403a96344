"""What the roles that make a venv share with each other and with the fleet router's run
(fleet/router_role.py): the interpreter a plan's Python names, the installer, and the plan's lock as
the Venv step takes it. Here, in the role machinery's package, because a role never imports another
role (docs/extending.md) and the fleet is above the roles (tests/layers.py)."""

from __future__ import annotations

from gpunode.errors import InventoryError
from gpunode.resolve.plan import PlannedLock
from gpunode.roles.context import RoleContext


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


def installer(v: dict) -> str:
    """uv (engine_installer's default) needs the base role's uv; without it, pip."""
    return str(v.get("engine_installer", "uv")) if v.get("base_uv", True) else "pip"
