"""Where roles and templates are found.

The shipped roles and unit templates live at the repository's top level (roles/, templates/);
the wheel puts them inside the package (gpunode/roles/<name>/, gpunode/templates/), so an
installed gpunode finds them there and a checkout finds them beside src/.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# A checkout: src/gpunode/ -> the repository's top level; an installed wheel has no src/ above it.
CHECKOUT = PACKAGE.parent.parent if (PACKAGE.parent.parent / "pyproject.toml").is_file() else None


def shipped(kind: str) -> list[Path]:
    """The shipped folders of `kind` ("roles" or "templates"): the package's, then the checkout's."""
    found = [PACKAGE / kind]
    if CHECKOUT is not None:
        found.append(CHECKOUT / kind)
    return [p for p in found if p.is_dir()]


def role_folders() -> list[Path]:
    return shipped("roles")


def template_folders() -> list[Path]:
    return shipped("templates")


def is_shipped(path: Path) -> bool:
    resolved = path.resolve()
    return any(resolved.is_relative_to(p.resolve()) for kind in ("roles", "templates") for p in shipped(kind))
