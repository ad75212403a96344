"""Workstation settings from config files, layered (later wins):

    built-in defaults
    < the user's   $XDG_CONFIG_HOME/gpunode/config.yaml (~/.config/gpunode/config.yaml)
    < the project's gpunode.yaml, in this folder or the nearest one above it
      ($GPUNODE_CONFIG names the file instead, and then no other project file is looked for)
    < environment variables (GPUNODE_INVENTORY, GPUNODE_FORKS, GPUNODE_KNOWN_HOSTS, GPUNODE_ROLES_PATH,
      GPUNODE_TEMPLATES_PATH, NO_COLOR, FORCE_COLOR)
    < command-line flags

A relative path in a file is relative to that file's folder, so a project file works from any
folder below it. The target's state folder (/var/lib/gpunode) is not a setting: it holds the lock
that keeps two runs apart, and two workstations configured differently would not see each other.
Docs: docs/config.md.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpunode import userfiles, yamlsrc
from gpunode.errors import InventoryError

PROJECT_FILE = "gpunode.yaml"
KEYS = ["inventory", "forks", "known_hosts", "colour", "roles_path", "templates_path", "prometheus_targets"]
COLOURS = ("auto", "always", "never")


@dataclass
class Settings:
    inventory: str | None = None        # inventory folder or file
    forks: int | None = None            # targets at once, for every task that has --forks
    known_hosts: str | None = None      # gpunode's own known_hosts file
    colour: str = "auto"                # auto: colour on a terminal; always; never
    roles_path: list[str] = field(default_factory=list)      # user role folders, before the shipped roles
    templates_path: list[str] = field(default_factory=list)  # user template folders, before the shipped ones
    prometheus_targets: str | None = None  # the file_sd file `inv provision` updates (docs/prometheus.md)
    origins: dict[str, str] = field(default_factory=dict)  # setting -> file:line or environment variable


def user_file() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "gpunode" / "config.yaml"


def project_file(start: Path | None = None) -> Path | None:
    named = os.environ.get("GPUNODE_CONFIG")
    if named:
        path = Path(named).expanduser()
        if not path.exists():  # a FIFO or a folder is refused by the reader, by name
            raise InventoryError(f"GPUNODE_CONFIG={named}: {userfiles.missing(path, 'no such file')}",
                                 hint="unset it or point it at a gpunode.yaml")
        return path
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / PROJECT_FILE).is_file():
            return folder / PROJECT_FILE
    return None


def load(start: Path | None = None) -> Settings:
    out = Settings()
    for path in (user_file(), project_file(start)):
        if path is not None and path.is_file():
            _apply_file(out, path)
    for env, key in (("GPUNODE_INVENTORY", "inventory"), ("GPUNODE_FORKS", "forks"),
                     ("GPUNODE_KNOWN_HOSTS", "known_hosts")):
        if os.environ.get(env):
            _set(out, key, os.environ[env], env)
    for env, key in (("GPUNODE_ROLES_PATH", "roles_path"), ("GPUNODE_TEMPLATES_PATH", "templates_path")):
        if os.environ.get(env):  # folders separated by ':', as PATH
            _set(out, key, [p for p in os.environ[env].split(":") if p], env)
    if os.environ.get("NO_COLOR"):  # https://no-color.org: any value turns colour off
        _set(out, "colour", "never", "NO_COLOR")
    elif os.environ.get("FORCE_COLOR"):
        _set(out, "colour", "always", "FORCE_COLOR")
    return out


def _apply_file(out: Settings, path: Path) -> None:
    doc = yamlsrc.load(path)
    if doc is None:
        return
    if not isinstance(doc, dict):
        raise InventoryError(f"{path}: a gpunode config file is a mapping of settings, got {type(doc).__name__}",
                             hint="e.g. `inventory: inventory/` and `forks: 8`, one per line")
    for key, value in doc.items():
        where = yamlsrc.where(doc, key, str(path))
        if key not in (*KEYS, "color"):
            close = difflib.get_close_matches(str(key), KEYS, n=1)
            raise InventoryError(f"{where}: unknown setting {key!r}",
                                 hint=f"did you mean {close[0]!r}?" if close else
                                 f"the settings are {', '.join(KEYS)} (docs/config.md)")
        if key in ("inventory", "known_hosts", "prometheus_targets") and isinstance(value, str) and value:
            value = _beside(path, value)
        if key in ("roles_path", "templates_path"):
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise InventoryError(f"{where}: {key} must be a folder or a list of folders, got {str(value)[:40]!r}",
                                     hint=f"e.g. `{key}: [~/gpunode/{key.split('_')[0]}]`")
            value = [_beside(path, v) for v in value]
        _set(out, "colour" if key == "color" else key, value, where)


def _beside(path: Path, value: str) -> str:
    """A relative path in a config file is relative to that file's folder."""
    given = Path(value).expanduser()
    return str(given if given.is_absolute() else path.parent / given)


def _set(out: Settings, key: str, value: Any, where: str) -> None:
    if key in ("roles_path", "templates_path"):
        pass  # a list of folders, checked by the caller
    elif key == "forks":
        text = str(value).strip()
        if isinstance(value, bool) or not (text.isascii() and text.isdigit() and 1 <= int(text) <= 256):
            raise InventoryError(f"{where}: forks must be a whole number from 1 to 256, got {str(value)[:40]!r}",
                                 hint="e.g. `forks: 8`")
        value = int(text)
    elif key == "colour":
        if value is False:  # YAML reads `never`'s cousin `no`/`off` as false
            value = "never"
        if value not in COLOURS:
            raise InventoryError(f"{where}: colour must be auto, always or never, got {str(value)[:40]!r}",
                                 hint="`colour: never` turns colour off (so does NO_COLOR=1)")
    elif not isinstance(value, str) or not value:
        raise InventoryError(f"{where}: {key} must be a path, got {str(value)[:40]!r}",
                             hint=f"e.g. `{key}: inventory/`" if key == "inventory" else "e.g. `~/.ssh/known_hosts`")
    setattr(out, key, value)
    out.origins[key] = where


def current() -> Settings:
    """The settings as they stand now (read each time: a few stat calls; tests change folder and env)."""
    return load()


def apply_colour(settings: Settings) -> None:
    """Rich reads NO_COLOR / FORCE_COLOR when a console is made: say the setting there."""
    if settings.colour == "never":
        os.environ["NO_COLOR"] = "1"
        os.environ.pop("FORCE_COLOR", None)
    elif settings.colour == "always":
        os.environ["FORCE_COLOR"] = "1"
        os.environ.pop("NO_COLOR", None)
