"""Roles read the typed plan only: from the resolver they may import its types (the plan's
dataclasses, fix actions and its typed variables with their one default, choices.py), never the
knowledge base or the code that reads it."""

from __future__ import annotations

import ast
from pathlib import Path

from gpunode import searchpath

ROLES = searchpath.shipped("roles")  # the package's (context, plan view) and the top level's role folders
TYPES = {"gpunode.resolve.plan", "gpunode.resolve.actions", "gpunode.resolve.choices"}


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_no_role_imports_the_resolver_beyond_its_types():
    assert any((root / "servers" / "role.py").is_file() for root in ROLES), ROLES
    offenders = {
        f"{path}: {name}"
        for root in ROLES
        for path in root.rglob("*.py")
        for name in imported(path)
        if (name == "gpunode.resolve" or name.startswith("gpunode.resolve."))
        and not any(name == t or name.startswith(t + ".") for t in TYPES)
    }
    assert not offenders, sorted(offenders)


def test_the_check_sees_an_import_of_the_loader(tmp_path):
    bad = tmp_path / "role.py"
    bad.write_text("from gpunode.resolve import load_kb\n")
    assert "gpunode.resolve.load_kb" in imported(bad)
