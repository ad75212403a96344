"""Where roles and templates are found: the user's folders first, then the shipped ones.

The shipped roles and unit templates live at the repository's top level (roles/, templates/);
the wheel puts them inside the package (gpunode/roles/<name>/, gpunode/templates/), so an
installed gpunode finds them there and a checkout finds them beside src/.

Before those come, in this order: the roles/ and templates/ folders inside a folder inventory
(`-i my-site`), those next to the inventory in use (`-i my-site/hosts.yml`), then the folders of
the `roles_path` / `templates_path` settings (docs/config.md). The first folder that has a role
or a template of a name wins, as in Ansible's roles_path.
`use()` sets them for the run (the CLI calls it once it knows the inventory).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from gpunode import userfiles
from gpunode.errors import InventoryError

PACKAGE = Path(__file__).resolve().parent
# A checkout: src/gpunode/ -> the repository's top level; an installed wheel has no src/ above it.
CHECKOUT = PACKAGE.parent.parent if (PACKAGE.parent.parent / "pyproject.toml").is_file() else None


_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


def shipped(kind: str) -> list[Path]:
    """The shipped folders of `kind` ("roles" or "templates"): the package's, then the checkout's."""
    found = [PACKAGE / kind]
    if CHECKOUT is not None:
        found.append(CHECKOUT / kind)
    return [p for p in found if p.is_dir()]


@dataclass(frozen=True)
class SearchPath:
    roles: tuple[Path, ...] = ()       # the user's role folders, before the shipped ones
    templates: tuple[Path, ...] = ()   # the user's template folders, before the shipped ones
    origins: dict[str, str] = field(default_factory=dict, compare=False, hash=False)  # folder -> why it is there


_current = SearchPath()


def use(inventory: Path | None = None, roles_path: list[str] | tuple[str, ...] = (),
        templates_path: list[str] | tuple[str, ...] = ()) -> SearchPath:
    """Set the user's folders for this run: next to `inventory` (a folder or a file), then the settings'."""
    global _current
    roles: list[Path] = []
    templates: list[Path] = []
    origins: dict[str, str] = {}
    shipped_all = {p.resolve() for kind in ("roles", "templates") for p in shipped(kind)}

    def add(into: list[Path], folder: Path, why: str) -> None:
        folder = folder.expanduser().resolve()
        if folder.is_dir() and folder not in shipped_all and folder not in into:
            into.append(folder)
            origins[str(folder)] = why

    if inventory is not None:
        given = Path(inventory).expanduser().resolve()
        # `-i my-site` and `-i my-site/hosts.yml` are one site: its roles/ and templates/ inside the
        # folder first (docs/extending.md's layout), then those beside the inventory as before.
        for where in ([given] if given.is_dir() else []) + [given.parent]:
            why = f"in the inventory folder {inventory}" if where == given else f"next to the inventory {inventory}"
            add(roles, where / "roles", why)
            add(templates, where / "templates", why)
    for p in roles_path:
        add(roles, Path(p), "the roles_path setting")
    for p in templates_path:
        add(templates, Path(p), "the templates_path setting")
    _current = SearchPath(tuple(roles), tuple(templates), origins)
    return _current


def current() -> SearchPath:
    return _current


def role_folders() -> list[Path]:
    return [*_current.roles, *shipped("roles")]


def template_folders() -> list[Path]:
    return [*_current.templates, *shipped("templates")]


def is_shipped(path: Path) -> bool:
    resolved = path.resolve()
    return any(resolved.is_relative_to(p.resolve()) for kind in ("roles", "templates") for p in shipped(kind))


def user_roles() -> dict[str, Path]:
    """name -> folder of every user role: the first folder on the search path that has it."""
    out: dict[str, Path] = {}
    for root in _current.roles:
        for sub in sorted(root.iterdir()):
            if sub.name not in out and os.path.lexists(sub / "role.py") and not (sub / "role.py").is_file():
                # a link loop, a link to nothing, a FIFO or a folder: a role meant, which would be skipped
                # without a word (issue 41: --only said "unknown role")
                gone = userfiles.missing(sub / "role.py", "")
                raise InventoryError(f"role folder {sub}: its role.py {gone or 'is no regular file'}",
                                     hint="make role.py the role's Python file, or move the folder out of "
                                     f"{root}")
            if not (sub / "role.py").is_file() or sub.name in out:
                continue
            if not _NAME.fullmatch(sub.name):
                raise InventoryError(f"role folder {sub}: {sub.name[:40]!r} is not a role name",
                                     hint="name it with letters, digits and _ (it is what --only takes)")
            out[sub.name] = sub
    return out


def shipped_roles() -> dict[str, Path]:
    """name -> folder of every shipped role (the first shipped folder that has it), by name."""
    out: dict[str, Path] = {}
    for root in shipped("roles"):
        for sub in sorted(root.iterdir()):
            if (sub / "role.py").is_file():
                out.setdefault(sub.name, sub)
    return out
