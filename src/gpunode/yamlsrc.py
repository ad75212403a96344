"""YAML loading that remembers where each key came from (file and line),
so that inventory and knowledge-base errors can point at the exact spot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpunode import userfiles
from gpunode.errors import InventoryError


class Located(dict):
    """A mapping that knows the file and the line of each of its keys."""

    file: str = "?"
    line: int = 0
    key_lines: dict[Any, int]

    def where(self, key: Any = None) -> str:
        line = self.key_lines.get(key, self.line) if key is not None else self.line
        return f"{self.file}:{line}"


# libyaml's parser (PyYAML's C extension, in its manylinux wheels) reads the knowledge base ~8x faster than
# the pure-Python one, with the same nodes and marks; the constructors below stay Python either way.
class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    pass


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> Located:
    loader.flatten_mapping(node)
    out = Located()
    out.file = loader.name
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in out:
            raise InventoryError(
                f"{loader.name}:{key_node.start_mark.line + 1}: key {key!r} appears twice",
                hint="remove one of them; YAML would silently keep only the last",
            )
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = key_node.start_mark.line + 1
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load(path: Path) -> Any:
    """Parse one YAML file; syntax errors become InventoryError naming file and line."""
    text = userfiles.read_text(path, what="YAML file")
    loader = _Loader(text)
    loader.name = str(path)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark else "?"
        raise InventoryError(f"{path}:{line}: YAML syntax error: {exc.problem}",
                             hint="fix the indentation or quoting at that line") from None
    finally:
        loader.dispose()


def where(node: Any, key: Any = None, fallback: str = "?") -> str:
    return node.where(key) if isinstance(node, Located) else fallback


def line_of(node: Any, key: Any) -> int:
    """The line of key in a mapping read by load(); 0 for a mapping made in code."""
    return node.key_lines.get(key, 0) if isinstance(node, Located) else 0
