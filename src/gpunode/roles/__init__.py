"""Roles: which steps, in what order, with which variables.

Each role lives in roles/<name>/ (the repository's top level; gpunode/roles/<name>/ in the
wheel) with role.py (`build(ctx) -> list[RolePlan]`), defaults.yml (its public variables,
each commented), types.yml (their types, checked by varspec.py) and README.md. The order
below is the provisioning order; DEPENDS says what `--only` checks is already
in place before it runs a role alone.
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from gpunode import searchpath
from gpunode.errors import InventoryError
from gpunode.roles.context import RoleContext

# A checkout keeps the shipped roles at its top level: `gpunode.roles.<name>` is found there too.
__path__ = [*__path__, *(str(p) for p in searchpath.shipped("roles") if str(p) not in __path__)]

ORDER = ("base", "engine", "cuda_fixes", "weights", "servers")
DEPENDS: dict[str, tuple[str, ...]] = {
    "base": (),
    "engine": ("base",),
    "cuda_fixes": ("engine",),
    "weights": ("base",),
    "servers": ("engine", "cuda_fixes", "weights"),
}

__all__ = ["DEPENDS", "ORDER", "RoleContext", "build", "defaults", "select"]


def folder(name: str) -> Path:
    """The folder of the role `name`: the first on the search path that has its role.py."""
    for root in searchpath.role_folders():
        if (root / name / "role.py").is_file():
            return root / name
    raise InventoryError(f"no role {name[:40]!r} in {', '.join(map(str, searchpath.role_folders()))}",
                         hint=f"roles: {', '.join(ORDER)}")


@cache
def _defaults_of(name: str) -> dict[str, Any]:
    return yaml.safe_load((folder(name) / "defaults.yml").read_text()) or {}


def defaults(names: tuple[str, ...] = ORDER) -> dict[str, Any]:
    """Every role's defaults.yml merged: the lowest layer of the variables."""
    out: dict[str, Any] = {}
    for name in names:
        out.update(_defaults_of(name))
    return out


def select(only: str | None) -> tuple[list[str], list[str]]:
    """--only a,b -> (roles to run, roles that must already be in place)."""
    if not only:
        return list(ORDER), []
    wanted = [r.strip() for r in only.split(",") if r.strip()]
    if not wanted:
        raise InventoryError(f"--only {only.strip()[:40]!r} names no role",
                             hint=f"e.g. --only engine; roles: {', '.join(ORDER)}")
    for name in wanted:
        if name not in ORDER:
            raise InventoryError(f"--only: unknown role {name[:40]!r}", hint=f"roles: {', '.join(ORDER)}")
    needed: list[str] = []

    def walk(name: str) -> None:
        for dep in DEPENDS[name]:
            if dep not in wanted and dep not in needed:
                walk(dep)
                needed.append(dep)

    for name in wanted:
        walk(name)
    run = [r for r in ORDER if r in wanted]
    return run, [r for r in ORDER if r in needed]


def build(names: list[str], ctx: RoleContext) -> list:
    """RolePlans for the named roles, in provisioning order."""
    plans = []
    for name in names:
        module = importlib.import_module(f"gpunode.roles.{name}.role")
        plans.extend(module.build(ctx))
    return plans
