"""A planned fix's actions as typed data: what fixes.yml's `actions:` become once their
placeholders are filled. The roles act on these by type; the plan's JSON form is the
same `{"kind": ..., params...}` objects fixes.yml writes (docs/resolve.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def _strings(value: Any) -> tuple[str, ...]:
    """A name or a list of them; a placeholder that stood for a list inside a list is spliced in."""
    if isinstance(value, str):
        return (value,)
    return tuple(str(x) for v in value or () for x in ([v] if isinstance(v, str) else v))


@dataclass(frozen=True)
class _Packages:
    kind: str = field(default="", init=False)
    packages: tuple[str, ...] = ()


@dataclass(frozen=True)
class PipInstall(_Packages):
    kind: str = field(default="pip_install", init=False)


@dataclass(frozen=True)
class PipUninstall(_Packages):
    kind: str = field(default="pip_uninstall", init=False)


@dataclass(frozen=True)
class AptInstall(_Packages):
    kind: str = field(default="apt_install", init=False)


@dataclass(frozen=True)
class Ldconfig:
    kind: str = field(default="ldconfig", init=False)


@dataclass(frozen=True)
class LibSymlink:
    """A library symlink in a folder the dynamic loader searches (libcuda.so -> libcuda.so.1)."""
    kind: str = field(default="symlink", init=False)
    dir: str = ""
    name: str = ""
    target: str = ""


@dataclass(frozen=True)
class Link:
    kind: str = field(default="link", init=False)
    path: str = ""
    target: str = ""


@dataclass(frozen=True)
class OverlayTree:
    kind: str = field(default="overlay_tree", init=False)
    contents_of: tuple[str, ...] = ()
    into: str = ""


@dataclass(frozen=True)
class RemoveTree:
    kind: str = field(default="remove_tree", init=False)
    path: str = ""


@dataclass(frozen=True)
class SetEnv:
    kind: str = field(default="env", init=False)
    vars: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Manual:
    """Something a person must do; the plan warns with the message."""
    kind: str = field(default="manual", init=False)
    message: str = ""


Action = (PipInstall | PipUninstall | AptInstall | Ldconfig | LibSymlink | Link | OverlayTree | RemoveTree
          | SetEnv | Manual)


def make(kind: str, p: dict[str, Any]) -> Action:
    """The typed action of fixes.yml's `kind` with its filled parameters (load.py checked the kinds)."""
    if kind in ("pip_install", "pip_uninstall", "apt_install"):
        packages = _strings(p.get("packages"))
        if kind == "pip_install":
            return PipInstall(packages=packages)
        return PipUninstall(packages=packages) if kind == "pip_uninstall" else AptInstall(packages=packages)
    if kind == "ldconfig":
        return Ldconfig()
    if kind == "symlink":
        return LibSymlink(dir=str(p.get("dir", "")), name=str(p.get("name", "")), target=str(p.get("target", "")))
    if kind == "link":
        return Link(path=str(p["path"]), target=str(p["target"]))
    if kind == "overlay_tree":
        return OverlayTree(contents_of=_strings(p.get("contents_of")), into=str(p["into"]))
    if kind == "remove_tree":
        return RemoveTree(path=str(p["path"]))
    if kind == "env":
        return SetEnv(vars={str(k): str(v) for k, v in (p.get("vars") or {}).items()})
    if kind == "manual":
        return Manual(message=" ".join(str(p.get("message", "")).split()))
    raise ValueError(f"unknown fix action kind {kind!r}")
