"""What every task shares: error translation, inventory loading, --set parsing."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import yaml
from invoke import Exit
from invoke import task as invoke_task

from gpunode import inventory
from gpunode.errors import GpunodeError, InventoryError
from gpunode.secrets import redact, register_vars

DEFAULT_INVENTORY = "inventory"


def task(*args: Any, **kwargs: Any):
    """invoke.task that turns GpunodeError into a clean message and exit code 2.

    The message names the target and ends with a hint; no traceback, because
    the error already carries its evidence.
    """

    def wrap(fn):
        @functools.wraps(fn)
        def run(*a: Any, **kw: Any):
            try:
                return fn(*a, **kw)
            except GpunodeError as exc:
                raise Exit(redact(f"error: {exc}"), code=2) from None
            except KeyboardInterrupt:
                raise Exit("interrupted; re-running is safe and resumes where this run stopped", code=130) from None

        return invoke_task(*args, **kwargs)(run) if args or kwargs else invoke_task(run)

    if len(args) == 1 and callable(args[0]) and not kwargs:
        fn = args[0]
        args = ()
        return wrap(fn)
    return wrap


def inventory_path(given: str | None) -> Path:
    return Path(given or os.environ.get("GPUNODE_INVENTORY") or DEFAULT_INVENTORY)


def load_inventory(given: str | None) -> inventory.Inventory:
    return inventory.load(inventory_path(given))


# Versions stay text: YAML would read python=3.10 as the number 3.1.
VERSION_KEYS = ("python", "engine_version")


def parse_sets(sets: list[str] | None) -> dict[str, Any]:
    """--set key=value (value read as YAML, so 0.85, true, [1, 2] keep their types; versions stay text)."""
    out: dict[str, Any] = {}
    for item in sets or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InventoryError(f"--set {item!r} is not key=value", hint="e.g. --set mem_fraction=0.85")
        key = key.strip()
        out[key] = value.strip() if key in VERSION_KEYS else (yaml.safe_load(value) if value else "")
    return out


def select_targets(inv: inventory.Inventory, host: str | None, ct: int | str | None, group: str | None,
                   overrides: dict[str, Any]) -> list[inventory.Target]:
    """--host H [--ct N] or --group G -> targets, with every role's defaults as the lowest layer."""
    from gpunode import roles
    from gpunode.roles import varspec

    defaults = roles.defaults()
    for h in inv.hosts.values():
        register_vars(h.vars)
        for c in h.containers.values():
            register_vars(c.vars)
    register_vars(inv.top_vars)
    for v in (*inv.group_vars.values(), *inv.host_vars_files.values()):
        register_vars(v)
    register_vars(overrides)
    if group:
        if host or ct:
            raise InventoryError("give either --group or --host/--ct, not both",
                                 hint="--group G provisions every container of every host in G")
        targets = inv.group_targets(group, overrides, defaults)
    elif not host:
        raise InventoryError("which target? pass --host H (and --ct N for a container) or --group G",
                             hint=f"hosts in {inv.source}: {', '.join(sorted(inv.hosts))}")
    else:
        targets = [inv.target(host, int(ct) if ct not in (None, "") else None, overrides, defaults)]
    for t in targets:  # once, after every layer: role defaults < inventory < --set
        varspec.check(t.vars, t.origins, t.name)
    return targets
