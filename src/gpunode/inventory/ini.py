"""Ansible's INI inventory (its default format) -> the same shape as an Ansible YAML inventory,
which ansible.read then reads: one set of rules for connection variables either way.

    [gpu]
    kpro6 ansible_host=10.0.0.6 containers="{200: {'gpus': [0, 1]}}"
    rented:2222 ansible_user=root

    [gpu:vars]
    model_source=/mnt/models/Qwen3.6-27B

    [fleet:children]
    gpu

Read as Ansible's ini plugin reads it (lib/ansible/plugins/inventory/ini.py): a host line is split
as a shell would split it, `#` starts a comment there, `host:port` sets the port, and values on a
host line or in a `:vars` section go through ast.literal_eval (22 is a number, "'22'" text,
anything literal_eval refuses stays as typed). Hosts before any section are in `ungrouped`.
Host ranges (`web[01:20]`) are refused: gpunode names each host.
"""

from __future__ import annotations

import ast
import re
import shlex
import warnings
from pathlib import Path
from typing import Any

from gpunode import userfiles, yamlsrc
from gpunode.errors import InventoryError
from gpunode.yamlsrc import Located

SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:[#;].*)?$")
GROUP = re.compile(r"^([^:\]\s]+)\s*(?:[#;].*)?$")
HOST_PORT = re.compile(r"^(?P<name>[^:\[\]]+)(?::(?P<port>[0-9]+))?$")


def looks_like_ini(path: Path) -> bool:
    """An .ini file, or a file not named .yml/.yaml/.json whose first statement is a [section]."""
    if path.suffix in (".yml", ".yaml", ".json"):
        return False
    if path.suffix == ".ini":
        return True
    text = userfiles.read_text(path, what="inventory file", limit=yamlsrc.USER_MAX_BYTES,
                              hint_large=yamlsrc.TOO_LARGE)
    for line in text.splitlines():
        line = line.strip()
        if line and line[0] not in "#;":
            return bool(SECTION.match(line))
    return False


def _located(path: Path, line: int) -> Located:
    out = Located()
    out.file, out.line, out.key_lines = str(path), line, {}
    return out


def value(text: str) -> Any:
    """A value as Ansible's ini plugin reads it: a Python literal where it is one, else the text."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            read = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    if isinstance(read, tuple | set):
        return list(read)
    if isinstance(read, bytes | complex) or read is ...:
        return text
    return read


def read(path: Path) -> Located:
    """The INI file as an Ansible YAML document ({all: {children: {...}}}), lines kept for errors."""
    text = userfiles.read_text(path, what="inventory file", limit=yamlsrc.USER_MAX_BYTES,
                              hint_large=yamlsrc.TOO_LARGE)
    bodies: dict[str, Located] = {}
    parents: dict[str, list[str]] = {}
    declared: set[str] = set()

    def body(group: str, line: int) -> Located:
        if group not in bodies:
            new = bodies[group] = _located(path, line)
            new["hosts"], new["vars"], new["children"] = _located(path, line), _located(path, line), {}
        return bodies[group]

    group, kind = "ungrouped", "hosts"
    declared.add("ungrouped")
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        where = f"{path}:{number}"
        if line.startswith("["):
            m = SECTION.match(line)
            if not m:
                raise InventoryError(f"{where}: {line[:60]!r} is not a section header",
                                     hint="write [group], [group:vars] or [group:children], without spaces")
            group, kind = m.group(1), m.group(2) or "hosts"
            if kind not in ("hosts", "vars", "children"):
                raise InventoryError(f"{where}: section [{group}:{kind}] has an unknown type {kind!r}",
                                     hint="the types are :vars and :children")
            body(group, number)
            if kind != "vars":
                declared.add(group)
        elif kind == "vars":
            key, sep, rest = line.partition("=")
            if not sep or not key.strip():
                raise InventoryError(f"{where}: expected key=value in [{group}:vars]",
                                     hint="one variable per line, e.g. model_source=/mnt/models/m")
            target = body(group, number)["vars"]
            target[key.strip()] = value(rest.strip())
            target.key_lines[key.strip()] = number
        elif kind == "children":
            m = GROUP.match(line)
            if not m:
                raise InventoryError(f"{where}: expected a group name in [{group}:children], got {line[:60]!r}",
                                     hint="one group name per line")
            parents.setdefault(m.group(1), []).append(group)
        else:
            _host_line(path, number, line, body(group, number)["hosts"])
    for child, of in parents.items():
        if child not in declared:
            raise InventoryError(f"{path}: [{of[-1]}:children] names group {child!r}, which is declared nowhere",
                                 hint=f"add a [{child}] section with its hosts")
        for parent in of:
            body(parent, 0)["children"][child] = bodies[child]
    for group in bodies:
        if group not in declared and group != "all":
            raise InventoryError(f"{path}: [{group}:vars] is for group {group!r}, which is declared nowhere",
                                 hint=f"add a [{group}] section, or name it in a [parent:children] section")
    _refuse_cycles(path, parents)
    top = body("all", 0)
    for group, b in list(bodies.items()):
        if group != "all" and group not in parents:  # a group nobody contains sits under `all`
            top["children"][group] = b
    for key in [k for k in ("hosts", "vars", "children") if not top[k]]:
        del top[key]
    for b in bodies.values():
        for key in [k for k in ("hosts", "vars", "children") if not b.get(k)]:
            b.pop(key, None)
    doc = _located(path, 1)
    doc["all"] = top
    return doc


def _host_line(path: Path, number: int, line: str, hosts: Located) -> None:
    where = f"{path}:{number}"
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError as exc:
        raise InventoryError(f"{where}: cannot split the host line: {exc}",
                             hint="close the quotes; a value with spaces is written key=\"a b\"") from None
    m = HOST_PORT.match(tokens[0])
    if not m:
        raise InventoryError(f"{where}: {tokens[0][:60]!r} is not a host name (host ranges such as web[01:20] "
                             "are not read)", hint="list each host on its own line")
    name = m.group("name")
    settings = _located(path, number)
    if m.group("port"):
        settings["ansible_port"] = int(m.group("port"))
        settings.key_lines["ansible_port"] = number
    for token in tokens[1:]:
        key, sep, text = token.partition("=")
        if not sep or not key:
            raise InventoryError(f"{where}: expected key=value after host {name}, got {token[:40]!r}",
                                 hint="host variables are written key=value on the host's line")
        settings[key] = value(text)
        settings.key_lines[key] = number
    hosts[name] = settings if settings else None
    hosts.key_lines[name] = number


def _refuse_cycles(path: Path, parents: dict[str, list[str]]) -> None:
    """Groups that contain each other, found by one iterative walk that enters each group once
    (issue 41: a walk per path took hours on 22 levels and overflowed the stack on 1500)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    for start in parents:
        if state.get(start):
            continue
        trail = [start]
        todo = [iter(parents.get(start, []))]
        state[start] = 1
        while todo:
            parent = next(todo[-1], None)
            if parent is None:
                state[trail.pop()] = 2
                todo.pop()
            elif state.get(parent) == 1:
                cycle = [*trail[trail.index(parent):], parent]
                raise InventoryError(f"{path}: groups {' -> '.join(cycle)} contain each other",
                                     hint="a group cannot be its own child")
            elif not state.get(parent):
                state[parent] = 1
                trail.append(parent)
                todo.append(iter(parents.get(parent, [])))
