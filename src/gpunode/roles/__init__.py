"""Roles: which steps, in what order, with which variables.

Each role lives in roles/<name>/ (the repository's top level; gpunode/roles/<name>/ in the
wheel) with role.py (`build(ctx) -> list[RolePlan]`), defaults.yml (its public variables,
each commented), types.yml (their types, named as gpunode/vartypes.py names them and checked by
the registry, gpunode/variables.py) and README.md.

The shipped roles run in ORDER; DEPENDS says what `--only` checks is already in place
before it runs a role alone. A user's role (a folder on the search path, gpunode.searchpath)
has the same parts and says where it runs in its role.py: DEPENDS (roles that must be in
place, which it also runs after), AFTER and BEFORE (roles it runs after or before). Without
a word it runs after the shipped roles. A user role of a shipped role's name replaces it.
"""

from __future__ import annotations

import hashlib
import importlib
import re
import sys
import types
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any

from gpunode import searchpath
from gpunode.engine.role import RolePlan
from gpunode.errors import InventoryError
from gpunode.roles.context import RoleContext
from gpunode.variables import mapping_file

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
_SYSTEM_FOLDERS = {"/var/lib", "/var/cache", "/var/log", "/var/tmp", "/usr/local", "/usr/lib", "/usr/bin",
                   "/usr/sbin", "/usr/share", "/etc/systemd", "/etc/default", "/opt/gpunode", "/etc/gpunode",
                   "/var/lib/gpunode", "/usr/local/bin", "/usr/local/lib", "/dev/shm", "/run/user"}

__all__ = ["DEPENDS", "ORDER", "Role", "RoleContext", "build", "defaults", "folder", "order", "select"]


@dataclass(frozen=True)
class Role:
    name: str
    folder: Path
    shipped: bool
    depends: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    before: tuple[str, ...] = ()


def folder(name: str) -> Path:
    """The folder of the role `name`: a user's first, then the shipped one."""
    user = searchpath.user_roles()
    if name in user:
        return user[name]
    for root in searchpath.shipped("roles"):
        if (root / name / "role.py").is_file():
            return root / name
    raise InventoryError(f"no role {name[:40]!r} in {', '.join(map(str, searchpath.role_folders()))}",
                         hint=f"roles: {', '.join(names())}")


def module(name: str) -> types.ModuleType:
    """The role's role.py: a shipped role as gpunode.roles.<name>.role, a user's under a package of its folder."""
    where = folder(name)
    if name not in searchpath.user_roles():
        return importlib.import_module(f"gpunode.roles.{name}.role")
    # One package per folder, so a user role may import its own modules (from . import x).
    package = f"gpunode_user_role_{hashlib.sha256(str(where).encode()).hexdigest()[:12]}_{name}"
    if package not in sys.modules:
        pkg = types.ModuleType(package)
        pkg.__path__ = [str(where)]
        pkg.__file__ = str(where / "__init__.py")
        sys.modules[package] = pkg
    try:
        return importlib.import_module(f"{package}.role")
    except InventoryError:
        raise
    except (Exception, SystemExit) as exc:  # a user's code: say which file, not an internal error (nor exit 0)
        raise InventoryError(f"role {name}: {where / 'role.py'} does not load: {type(exc).__name__}: "
                             f"{str(exc)[:200]}", hint="fix that file; GPUNODE_DEBUG=1 shows where") from exc


def _call(name: str, what: str, fn: Any, *args: Any) -> Any:
    """A user role's function: whatever it raises (SystemExit too: `inv provision` ended with exit 0,
    nothing done) is an error naming the role and the function (issue 41)."""
    if name not in searchpath.user_roles():
        return fn(*args)
    try:
        return fn(*args)
    except InventoryError:
        raise
    except (Exception, SystemExit) as exc:
        raise InventoryError(f"role {name}: {what}() in {folder(name) / 'role.py'} raised {type(exc).__name__}: "
                             f"{str(exc)[:200]}", hint="fix that file; GPUNODE_DEBUG=1 shows where") from exc


def _words(role: str, mod: types.ModuleType, attr: str, known: set[str]) -> tuple[str, ...]:
    value = getattr(mod, attr, ())
    if isinstance(value, str) or not isinstance(value, (tuple, list)) or not all(isinstance(v, str) for v in value):
        raise InventoryError(f"role {role}: {attr} in {mod.__file__} must be a tuple of role names, got {value!r:.60}",
                             hint=f'e.g. {attr} = ("servers",)')
    for v in value:
        if v not in known:
            raise InventoryError(f"role {role}: {attr} in {mod.__file__} names {v[:40]!r}, which is no role",
                                 hint=f"roles: {', '.join(sorted(known))}")
        if v == role:
            raise InventoryError(f"role {role}: {attr} in {mod.__file__} names the role itself",
                                 hint=f"remove {role!r} from {attr}")
    return tuple(value)


@cache
def _catalogue(user_roots: tuple[Path, ...]) -> dict[str, Role]:
    user = searchpath.user_roles()
    known = set(ORDER) | set(user)
    out: dict[str, Role] = {}
    for name in ORDER:
        if name not in user:
            out[name] = Role(name, folder(name), True, DEPENDS[name])
    for name, where in user.items():
        mod = module(name)
        depends = _words(name, mod, "DEPENDS", known)
        if name in DEPENDS and not hasattr(mod, "DEPENDS"):
            depends = DEPENDS[name]  # a replaced shipped role keeps its dependencies unless it says otherwise
        out[name] = Role(name, where, False, depends, _words(name, mod, "AFTER", known),
                         _words(name, mod, "BEFORE", known))
    return out


def catalogue() -> dict[str, Role]:
    """Every role on the search path, by name."""
    return _catalogue(searchpath.current().roles)


def registered() -> list[str]:
    """Roles of the registered folders (searchpath.register: the lab's demo): typed, never provisioned."""
    return sorted({sub.name for root in searchpath.registered("roles") if root.is_dir() for sub in root.iterdir()
                   if (sub / "role.py").is_file() and sub.name not in ORDER})


def names() -> list[str]:
    return list(order())


def order() -> tuple[str, ...]:
    """The provisioning order: the shipped roles in ORDER, each user role where it says (after its
    DEPENDS and AFTER, before its BEFORE), else after the shipped roles; a cycle is refused."""
    roles = catalogue()
    edges: dict[str, set[str]] = {name: set() for name in roles}  # name -> roles that must come first
    shipped = [n for n in ORDER if n in roles]
    for first, then in zip(shipped, shipped[1:], strict=False):
        edges[then].add(first)
    for role in roles.values():
        edges[role.name].update(role.depends, role.after)
        if not (role.shipped or role.name in ORDER or role.depends or role.after or role.before) and shipped:
            edges[role.name].add(shipped[-1])  # says nothing: after the shipped roles
        for later in role.before:
            edges[later].add(role.name)
    rank = {name: (0, ORDER.index(name)) if name in ORDER else (1, 0) for name in roles}
    placed: list[str] = []
    while len(placed) < len(roles):
        ready = [n for n in roles if n not in placed and edges[n] <= set(placed)]
        if not ready:
            stuck = sorted(n for n in roles if n not in placed)
            raise InventoryError(f"the roles {', '.join(stuck)} wait for each other (DEPENDS, AFTER and BEFORE "
                                 "make a cycle)", hint="; ".join(f"{n}: {roles[n].folder}/role.py" for n in stuck
                                                                  if not roles[n].shipped) or "check the user roles")
        placed.append(min(ready, key=lambda n: (rank[n], n)))
    return tuple(placed)


@cache
def _defaults_of(where: Path) -> dict[str, Any]:
    return mapping_file(where / "defaults.yml")


def defaults(names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Every role's defaults.yml merged: the lowest layer of the variables."""
    out: dict[str, Any] = {}
    for name in names if names is not None else order():
        out.update(_defaults_of(folder(name)))
    return out


def select(only: str | None) -> tuple[list[str], list[str]]:
    """--only a,b -> (roles to run, roles that must already be in place)."""
    everything = order()
    if only is None:
        return list(everything), []
    wanted = [r.strip() for r in only.split(",") if r.strip()]
    if not wanted:
        raise InventoryError(f"--only {only.strip()[:40]!r} names no role",
                             hint=f"e.g. --only engine; roles: {', '.join(everything)}")
    for name in wanted:
        if name not in everything:
            raise InventoryError(f"--only: unknown role {name[:40]!r}", hint=f"roles: {', '.join(everything)}")
    roles = catalogue()
    needed: list[str] = []

    def walk(name: str) -> None:
        for dep in roles[name].depends:
            if dep not in wanted and dep not in needed:
                walk(dep)
                needed.append(dep)

    for name in wanted:
        walk(name)
    run = [r for r in everything if r in wanted]
    return run, [r for r in everything if r in needed]


def removals(vars: dict[str, Any]) -> list[str]:
    """What `inv teardown` removes for the user roles besides their gpunode-* units: each role's
    `removes(vars)`, absolute paths below a top-level folder (never / or /etc itself)."""
    out: list[str] = []
    for name, role in catalogue().items():
        if not role.shipped:  # the shipped roles' paths are fleet/teardown.PATHS
            out.extend(p for p in _removes(name, role, vars) if p not in out)
    return out


def _removes(name: str, role: Role, vars: dict[str, Any]) -> list[str]:
    """A user role's removes(vars), each path checked; build() asks it too, so a bad answer is refused
    by provision and --check, not first by the teardown that needs it (issue 41)."""
    hook = getattr(module(name), "removes", None)
    given = _call(name, "removes", hook, vars) if hook is not None else ()
    if isinstance(given, str) or not isinstance(given, (list, tuple)):
        raise InventoryError(f"role {name}: removes() in {role.folder / 'role.py'} gave {type(given).__name__}, "
                             "not a list of paths", hint="return a list of the absolute paths the role made")
    for path in given:
        parts = PurePosixPath(str(path)).parts
        if (not isinstance(path, str) or not path.startswith("/") or len(parts) < 3 or ".." in parts
                or re.search(r"[\x00-\x1f\x7f]", path) or path.rstrip("/") in _SYSTEM_FOLDERS
                or not _names_its_maker(name, parts[1:])):
            raise InventoryError(f"role {name}: removes() in {role.folder / 'role.py'} gave {str(path)[:80]!r}",
                                 hint=f"give the absolute paths the role made, two folders deep at least and "
                                 f"with the role's name or gpunode in a folder's name (/etc/{name}, "
                                 f"/var/lib/gpunode-{name}), never a system folder")
    return list(given)


def _names_its_maker(role: str, parts: tuple[str, ...]) -> bool:
    """Whether a folder's name on the path says gpunode or the role made it: teardown removes only
    what gpunode made (issue 41: /etc/ssh, /var/lib/dpkg, /root/.ssh and /boot/grub got through)."""
    marks = {"gpunode", role.lower(), role.lower().replace("_", "-")}
    return any(mark in part.lower() for part in parts for mark in marks)


def build(names: list[str], ctx: RoleContext) -> list:
    """RolePlans for the named roles, in provisioning order."""
    plans: list[RolePlan] = []
    for name in names:
        mod = module(name)
        fn = getattr(mod, "build", None)
        if not callable(fn):  # a user's role.py without it was an AttributeError, an internal error (issue 41)
            raise InventoryError(f"role {name}: {folder(name) / 'role.py'} has no build(ctx) function",
                                 hint="define build(ctx) returning a list of RolePlan (docs/extending.md)")
        given = _call(name, "build", fn, ctx)
        if not isinstance(given, (list, tuple)) or not all(isinstance(p, RolePlan) for p in given):
            # None or a text failed deep in the engine, an internal error (issue 41)
            odd = given if not isinstance(given, (list, tuple)) else next(p for p in given
                                                                          if not isinstance(p, RolePlan))
            raise InventoryError(f"role {name}: build() in {folder(name) / 'role.py'} gave "
                                 f"{type(odd).__name__} {str(odd)[:60]!r} where a list of RolePlan belongs",
                                 hint="return [RolePlan(name, [steps...])] (docs/extending.md)")
        role = catalogue().get(name)
        if role is not None and not role.shipped:
            _removes(name, role, ctx.vars)
        plans.extend(given)
    return plans
