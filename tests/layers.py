"""The layer contract: which part of gpunode may import which, read from the source (docs/architecture.md).

Every module of src/gpunode, the shipped roles (roles/<name>/, counted as gpunode.roles.<name>, the roles layer) and
the lab (lab/gpunode_lab) is read with Python's ast; every import counts, a function-local one too
(an import inside a function still ties the two modules together), except one under
`if TYPE_CHECKING:`, which never runs. tests/unit/test_layers.py holds the tree to it: no import
circle, and no import from a layer to one above it. scripts/house prints the same figures for any
revision (`scripts/house --rev REV`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Top first. A module belongs to the layer of the longest prefix that names it; it may import its own
#: layer and those below, never one above. Within a layer, the module graph must still have no circle.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("lab: the test lab and its stand-ins", ("gpunode_lab",)),
    ("entry: the tasks (parse, wire, print)", ("gpunode.cli",)),
    ("runs: one run's data flow and what it reports", (
        "gpunode.pipeline", "gpunode.report", "gpunode.rollout", "gpunode.wheelhouse", "gpunode.testing",
        "gpunode.bench", "gpunode.doctor", "gpunode.tune")),
    ("fleet: the provisioned targets' status, keys and router", ("gpunode.fleet",)),
    ("roles: the shipped roles and the role machinery", ("gpunode.roles",)),
    ("engine: runs the steps of role plans", ("gpunode.engine",)),
    ("steps: one module per resource kind", ("gpunode.steps",)),
    ("knowledge: what the compat/ files hold, made and judged", ("gpunode.knowledge", "gpunode.judge")),
    ("plan: facts + variables -> plan", ("gpunode.resolve",)),
    ("sources: what a target, the inventory and Proxmox say", (
        "gpunode.facts", "gpunode.inventory", "gpunode.pve")),
    ("transport: commands on a target", ("gpunode.transport", "gpunode.become")),
    ("base: used by every layer", (
        "gpunode", "gpunode.errors", "gpunode.shell", "gpunode.marked", "gpunode.userfiles", "gpunode.yamlsrc",
        "gpunode.durable", "gpunode.secrets", "gpunode.searchpath", "gpunode.listen", "gpunode.settings",
        "gpunode.vartypes", "gpunode.variables")),
)

#: Where a module of an older revision lives now, so that its imports are measured against today's layers.
MOVED = {
    "gpunode.inventory": "gpunode.inventory.core", "gpunode.inventory_ansible": "gpunode.inventory.ansible",
    "gpunode.inventory_ini": "gpunode.inventory.ini", "gpunode.inventory_edit": "gpunode.inventory.edit",
    "gpunode.hostpatterns": "gpunode.inventory.patterns", "gpunode.kbrefresh": "gpunode.knowledge.refresh",
    **{f"gpunode.{m}": f"gpunode.knowledge.{m}"
       for m in ("proposal", "releases", "pinlocks", "kernelsms", "fatbin", "wheelregistry")},
}


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int
    local: bool  # inside a function: it runs when the function does


def modules(files: dict[str, str]) -> dict[str, str]:
    """repository path -> dotted module name, for the paths the contract covers."""
    out: dict[str, str] = {}
    for path in files:
        if not path.endswith(".py"):
            continue
        parts = path[:-3].split("/")
        if parts[:2] == ["src", "gpunode"]:
            parts = parts[1:]
        elif parts[0] == "roles" and len(parts) > 1:
            parts = ["gpunode", *parts]
        elif parts[:2] == ["lab", "gpunode_lab"]:
            parts = parts[1:]
        else:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[path] = ".".join(parts)
    return out


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, local: bool = False) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            yield from ((n, local) for child in node.orelse for n, _ in _imports(ast.Module([child], [])))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, local
        inner = local or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from _imports(node, inner)


def graph(files: dict[str, str]) -> list[Import]:
    """Every import between two covered modules; `files`: repository path -> text."""
    names = modules(files)
    known = set(names.values())

    def owner(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    out: list[Import] = []
    for path, mod in names.items():
        package = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
        for node, local in _imports(ast.parse(files[path], path)):
            if isinstance(node, ast.Import):
                wanted = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                wanted = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            for name in wanted:
                target = owner(name)
                if target and target != mod:
                    out.append(Import(mod, target, node.lineno, local))
    return out


def layer_of(module: str) -> int | None:
    module = MOVED.get(module, module)
    best: tuple[int, int] | None = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > best[1]):
                best = (i, len(p))
    return best[0] if best else None


def circles(imports: Iterable[Import]) -> list[list[str]]:
    """The import circles: each strongly connected set of two or more modules, sorted."""
    edges: dict[str, set[str]] = {}
    for imp in imports:
        edges.setdefault(imp.source, set()).add(imp.target)
        edges.setdefault(imp.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm; the tree is shallow enough for recursion
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def back_up(imports: Iterable[Import]) -> list[Import]:
    """The imports from a layer to one above it."""
    out = []
    for imp in imports:
        a, b = layer_of(imp.source), layer_of(imp.target)
        if a is not None and b is not None and b < a:
            out.append(imp)
    return sorted(out, key=lambda i: (i.source, i.target))


def unplaced(files: dict[str, str]) -> list[str]:
    return sorted(m for m in modules(files).values() if layer_of(m) is None)


def package_root(files: dict[str, str]) -> list[str]:
    """The modules that sit directly in src/gpunode/ (not in a package of their own)."""
    return sorted(p.removeprefix("src/gpunode/")[:-3] for p in files
                  if p.startswith("src/gpunode/") and p.count("/") == 2 and p.endswith(".py")
                  and not p.endswith("__init__.py"))


def packages(files: dict[str, str]) -> list[str]:
    return sorted({p.split("/")[2] for p in files if p.startswith("src/gpunode/") and p.count("/") >= 3
                   and p.endswith("/__init__.py") and p.count("/") == 3})


def working_tree(root: Path = ROOT) -> dict[str, str]:
    out = {}
    for top in ("src/gpunode", "roles", "lab/gpunode_lab"):
        for f in sorted((root / top).rglob("*.py")):
            out[str(f.relative_to(root))] = f.read_text()
    return out
