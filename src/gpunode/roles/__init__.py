"""Roles: which steps, in what order, with which variables.

Every role is a folder on the search path (gpunode.searchpath: a user's folders first, the shipped
roles/ last; the first folder that has a name wins, so a user role of a shipped role's name replaces
it wholly: its code, its defaults, its types and its place) with role.py (`build(ctx) ->
list[RolePlan]`), defaults.yml (its public variables, each commented), types.yml (their types, named
as gpunode/vartypes.py names them and checked by the registry, gpunode/variables.py) and README.md.

Each role says where it runs in its role.py: DEPENDS (roles that must be in place, which `--only`
checks and which it runs after), AFTER and BEFORE (roles it runs after or before). A role that says
nothing runs after the shipped ones. Roles free to run at the same point run the shipped ones first,
then by name. All of that is read from role.py's text, so ordering the roles imports none of them;
each role.py is imported, under a package of its own folder (so it may import its own modules with
`from . import x`), only when its build runs.
"""

from __future__ import annotations

import ast
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

PLACEMENT = ("DEPENDS", "AFTER", "BEFORE")
_SYSTEM_FOLDERS = {"/var/lib", "/var/cache", "/var/log", "/var/tmp", "/usr/local", "/usr/lib", "/usr/bin",
                   "/usr/sbin", "/usr/share", "/etc/systemd", "/etc/default", "/opt/gpunode", "/etc/gpunode",
                   "/var/lib/gpunode", "/usr/local/bin", "/usr/local/lib", "/dev/shm", "/run/user"}

__all__ = ["Role", "RoleContext", "build", "defaults", "folder", "module", "order", "select", "shipped"]


@dataclass(frozen=True)
class Role:
    name: str
    folder: Path
    shipped: bool  # found in the shipped folder (no user folder has its name)
    depends: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    before: tuple[str, ...] = ()


def _found() -> dict[str, tuple[Path, bool]]:
    """name -> (folder, shipped) of every role: the first folder on the search path that has it."""
    out = {name: (where, False) for name, where in searchpath.user_roles().items()}
    for name, where in searchpath.shipped_roles().items():
        out.setdefault(name, (where, True))
    return out


def folder(name: str) -> Path:
    """The folder of the role `name`: a user's first, then the shipped one."""
    found = _found()
    if name in found:
        return found[name][0]
    raise InventoryError(f"no role {name[:40]!r} in {', '.join(map(str, searchpath.role_folders()))}",
                         hint=f"roles: {', '.join(names())}")


def _is_shipped(name: str) -> bool:
    return _found().get(name, (None, True))[1]


def module(name: str, part: str = "role") -> types.ModuleType:
    """The role's role.py (or another module of its folder, `part`), imported under one package per
    folder, so a role imports its own modules with `from . import x`; a shipped role the same way."""
    where = folder(name)
    package = f"gpunode_role_{hashlib.sha256(str(where).encode()).hexdigest()[:12]}_{name}"
    if package not in sys.modules:
        pkg = types.ModuleType(package)
        pkg.__path__ = [str(where)]
        pkg.__file__ = str(where / "__init__.py")
        sys.modules[package] = pkg
    if _is_shipped(name):  # gpunode's own code: a mistake in it is an internal error, not the user's file
        return importlib.import_module(f"{package}.{part}")
    try:
        return importlib.import_module(f"{package}.{part}")
    except InventoryError:
        raise
    except (Exception, SystemExit) as exc:  # a user's code: say which file, not an internal error (nor exit 0)
        raise InventoryError(f"role {name}: {where / (part + '.py')} does not load: {type(exc).__name__}: "
                             f"{str(exc)[:200]}", hint="fix that file; GPUNODE_DEBUG=1 shows where") from exc


def _call(name: str, what: str, fn: Any, *args: Any) -> Any:
    """A user role's function: whatever it raises (SystemExit too: `inv provision` ended with exit 0,
    nothing done) is an error naming the role and the function (issue 41)."""
    if _is_shipped(name):
        return fn(*args)
    try:
        return fn(*args)
    except InventoryError:
        raise
    except (Exception, SystemExit) as exc:
        raise InventoryError(f"role {name}: {what}() in {folder(name) / 'role.py'} raised {type(exc).__name__}: "
                             f"{str(exc)[:200]}", hint="fix that file; GPUNODE_DEBUG=1 shows where") from exc


@cache
def _placement(path: Path) -> dict[str, Any]:
    """DEPENDS, AFTER and BEFORE as role.py writes them, read from its text (ordering imports no role)."""
    name = path.parent.name
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (SyntaxError, ValueError) as exc:
        raise InventoryError(f"role {name}: {path} does not load: {type(exc).__name__}: {str(exc)[:200]}",
                             hint="fix that file; GPUNODE_DEBUG=1 shows where") from None
    out: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in PLACEMENT:
            try:
                out[target.id] = ast.literal_eval(value)
            except ValueError:
                out[target.id] = ast.unparse(value)  # refused by _words, naming what is written
    return out


def _words(role: str, path: Path, attr: str, known: set[str]) -> tuple[str, ...]:
    value = _placement(path).get(attr, ())
    if isinstance(value, str) or not isinstance(value, (tuple, list)) or not all(isinstance(v, str) for v in value):
        raise InventoryError(f"role {role}: {attr} in {path} must be a tuple of role names, written out, "
                             f"got {value!r:.60}", hint=f'e.g. {attr} = ("servers",)')
    for v in value:
        if v not in known:
            raise InventoryError(f"role {role}: {attr} in {path} names {v[:40]!r}, which is no role",
                                 hint=f"roles: {', '.join(sorted(known))}")
        if v == role:
            raise InventoryError(f"role {role}: {attr} in {path} names the role itself",
                                 hint=f"remove {role!r} from {attr}")
    return tuple(value)


@cache
def _catalogue(found: tuple[tuple[str, Path, bool], ...]) -> dict[str, Role]:
    known = {name for name, _, _ in found}
    out: dict[str, Role] = {}
    for name, where, shipped in found:
        path = where / "role.py"
        out[name] = Role(name, where, shipped, *(_words(name, path, attr, known) for attr in PLACEMENT))
    return out


def catalogue() -> dict[str, Role]:
    """Every role on the search path, by name."""
    return _catalogue(tuple((name, where, shipped) for name, (where, shipped) in sorted(_found().items())))


def names() -> list[str]:
    return list(order())


def order() -> tuple[str, ...]:
    """The provisioning order: each role after its DEPENDS and AFTER and before its BEFORE; one that
    says nothing after the shipped roles; among those free to run, the shipped first, then by name.
    A cycle is refused."""
    return _order(catalogue())


def shipped() -> tuple[str, ...]:
    """The shipped roles alone, in their order (what docs/variables.md documents)."""
    found = searchpath.shipped_roles()
    return _order(_catalogue(tuple((name, where, True) for name, where in sorted(found.items()))))


def _order(roles: dict[str, Role]) -> tuple[str, ...]:
    edges: dict[str, set[str]] = {name: set() for name in roles}  # name -> roles that must come first
    for role in roles.values():
        edges[role.name].update(role.depends, role.after)
        for later in role.before:
            edges[later].add(role.name)

    def first(name: str, seen: set[str]) -> set[str]:  # every role that must come before `name`
        for dep in edges[name] - seen:
            seen.add(dep)
            first(dep, seen)
        return seen

    for role in roles.values():
        if not (role.shipped or role.depends or role.after or role.before):
            # says nothing: after the shipped roles, but those that need it (a replaced base) before them
            edges[role.name].update(s for s, r in roles.items() if r.shipped and role.name not in first(s, set()))
    placed: list[str] = []
    while len(placed) < len(roles):
        ready = [n for n in roles if n not in placed and edges[n] <= set(placed)]
        if not ready:
            stuck = sorted(n for n in roles if n not in placed)
            raise InventoryError(f"the roles {', '.join(stuck)} wait for each other (DEPENDS, AFTER and BEFORE "
                                 "make a cycle)", hint="; ".join(f"{n}: {roles[n].folder}/role.py" for n in stuck))
        placed.append(min(ready, key=lambda n: (not roles[n].shipped, n)))
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
