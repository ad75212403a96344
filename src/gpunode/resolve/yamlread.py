"""Typed reads from knowledge-base YAML, with errors that name file, line and key."""

from __future__ import annotations

from typing import Any

from gpunode.errors import ResolveError
from gpunode.yamlsrc import where

_MISSING = object()


class KnowledgeBaseError(ResolveError):
    """A file under gpunode/compat/ is malformed; the message names file, line and key."""


class Reader:
    """One YAML mapping plus the dotted path that led to it (for messages)."""

    def __init__(self, node: Any, path: str, file: str):
        if not isinstance(node, dict):
            raise KnowledgeBaseError(f"{file}: {path} must be a mapping, not {type(node).__name__}",
                                     hint=f"fix {path} in {file}")
        self.node = node
        self.path = path
        self.file = file

    def where(self, key: str | None = None) -> str:
        return where(self.node, key, fallback=self.file)

    def fail(self, key: str | None, problem: str) -> KnowledgeBaseError:
        name = f"{self.path}.{key}" if key else self.path
        return KnowledgeBaseError(f"{self.where(key)}: {name}: {problem}",
                                  hint=f"fix {name} in {self.file} (see the comments at its top)")

    def get(self, key: str, kind: type | tuple[type, ...] = object, default: Any = _MISSING) -> Any:
        if key not in self.node:
            if default is _MISSING:
                raise self.fail(key, "missing")
            return default
        value = self.node[key]
        if value is None and default is not _MISSING and default is None:
            return None
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        numeric = any(k in (int, float) for k in _tuple(kind))
        if not isinstance(value, kind) or (numeric and isinstance(value, bool)):
            raise self.fail(key, f"expected {_kind_name(kind)}, got {value!r}")
        return value

    def text(self, key: str, default: Any = _MISSING) -> Any:
        value = self.get(key, (str, int, float), default)
        return value if value is None or isinstance(value, str) else str(value)

    def strings(self, key: str, default: Any = _MISSING) -> tuple[str, ...]:
        value = self.get(key, list, default)
        if value is None:
            return ()
        if not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
            raise self.fail(key, f"expected a list of strings, got {value!r}")
        return tuple(str(v) for v in value)

    def str_map(self, key: str, default: Any = _MISSING) -> dict[str, str]:
        value = self.get(key, dict, default)
        if value is None:
            return {}
        out = {}
        for k, v in value.items():
            if not isinstance(v, (str, int, float)) or isinstance(v, bool):
                raise self.fail(key, f"value of {k!r} must be a string, got {v!r}")
            out[str(k)] = str(v)
        return out

    def child(self, key: str) -> Reader:
        return Reader(self.get(key, dict), f"{self.path}.{key}", self.file)

    def items(self, key: str) -> list[Reader]:
        value = self.get(key, list)
        return [Reader(v, f"{self.path}.{key}[{i}]", self.file) for i, v in enumerate(value)]

    def source(self) -> str:
        value = self.text("source", default=None)
        if not value or not value.strip():
            raise self.fail("source", "every rule must name its source (a URL or a section of the facts)")
        return value.strip()

    def only(self, allowed: set[str]) -> None:
        for key in self.node:
            if key not in allowed:
                raise self.fail(str(key), f"unknown key; known: {', '.join(sorted(allowed))}")


def _tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in _tuple(kind))
