"""Ansible YAML inventories: `all:` (and other top-level groups) with `hosts:`,
`children:` and `vars:`, read the way Ansible reads them.

Ansible's connection variables are honoured wherever Ansible honours them: on
a host and in the `vars:` of any group it belongs to (the host wins over its
groups, a child group over its parent). A connection variable gpunode has no
equivalent for (a password, ProxyCommand arguments, a become method but sudo) is refused rather
than ignored, because ignoring it would connect somewhere or as someone the
user did not mean.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpunode import yamlsrc
from gpunode.errors import InventoryError
from gpunode.inventory.names import name_fits, name_is_text, suggest
from gpunode.yamlsrc import Located

# Ansible name -> gpunode host key. The ansible_ssh_* forms are Ansible's older spellings.
CONNECTION = {"ansible_host": "address", "ansible_ssh_host": "address", "ansible_port": "port",
              "ansible_ssh_port": "port", "ansible_user": "user", "ansible_ssh_user": "user",
              "ansible_ssh_private_key_file": "key", "ansible_private_key_file": "key",
              "ansible_connection": "connection", "ansible_become": "become", "ansible_become_user": "become_user",
              "ansible_become_method": "become_method"}
# Where a password goes instead of the inventory (transport/become.py)
PASSWORDS = {"ansible_become_password", "ansible_become_pass", "ansible_password", "ansible_ssh_pass",
             "ansible_ssh_password"}
# How Ansible runs its modules; gpunode runs no Ansible modules, so these change nothing.
IGNORED = {"ansible_python_interpreter"}
CONNECTIONS = {"ssh": "ssh", "paramiko": "ssh", "smart": "ssh", "local": "local"}
GROUP_KEYS = {"hosts", "children", "vars"}


def is_ansible(doc: Any) -> bool:
    return isinstance(doc, dict) and "all" in doc and "hosts" not in doc


def _new(like: Any) -> Located:
    out = Located()
    out.file = getattr(like, "file", "?")
    out.line = getattr(like, "line", 0)
    out.key_lines = {}
    return out


def connection_vars(node: Any, what: str, host_keys: set[str]) -> tuple[Located, Located]:
    """Split a host's settings or a group's vars into (gpunode host keys, plain variables)."""
    conn, plain = _new(node), _new(node)
    for key, value in node.items():
        line = node.key_lines.get(key, 0) if isinstance(node, Located) else 0
        if key in CONNECTION:
            name = CONNECTION[key]
            if name == "connection":
                if value not in CONNECTIONS:
                    raise InventoryError(f"{yamlsrc.where(node, key)}: {key}={value!r} of {what} is not a "
                                         "connection gpunode has", hint="use ssh (or paramiko/smart) or local")
                value = CONNECTIONS[value]
            if name == "become_method":
                if value != "sudo":
                    raise InventoryError(f"{yamlsrc.where(node, key)}: {key}={value!r} of {what}: gpunode becomes "
                                         "root with sudo only", hint="use sudo, or log in as root and drop become")
                continue
            if name in conn and conn[name] != value:
                raise InventoryError(f"{yamlsrc.where(node, key)}: {what} sets {name} twice ({key} and an alias)",
                                     hint="keep one of them")
            conn[name] = value
            conn.key_lines[name] = line
        elif key in PASSWORDS:
            raise InventoryError(
                f"{yamlsrc.where(node, key)}: {key} of {what}: gpunode reads no password from the inventory",
                hint="log in with a key (ssh-agent works); for sudo's password pass -K (--ask-become-pass) or set "
                "$GPUNODE_BECOME_PASSWORD. Remove the setting")
        elif str(key).startswith("ansible_") and key not in IGNORED:
            raise InventoryError(
                f"{yamlsrc.where(node, key)}: {key} of {what} has no equivalent in gpunode",
                hint="gpunode understands " + ", ".join(sorted(CONNECTION)) + "; it logs in with a key as "
                "that user (sudo for become; no passwords in the inventory); put jump hosts in ~/.ssh/config. "
                "Remove the setting")
        elif key in IGNORED:
            continue
        elif key in host_keys:
            conn[key] = value
            conn.key_lines[key] = line
        else:
            plain[key] = value
            plain.key_lines[key] = line
    return conn, plain


def read(doc: dict, path: Path, parse_host, host_keys: set[str]):
    """Walk the groups -> (hosts, groups, vars of `all`, vars of the other groups)."""
    # host -> (its settings, where they are, [(group, what the group chain sets)])
    bodies: dict[str, tuple[Any, str, list[tuple[str, Located]]]] = {}
    groups: dict[str, list[str]] = {}
    group_vars: dict[str, dict[str, Any]] = {}

    depth: dict[str, int] = {}  # the longest path from `all`, as Ansible's Group.depth
    own: dict[str, list[str]] = {}       # group -> its hosts, in order
    kids: dict[str, list[str]] = {}      # group -> its child groups, in order
    # A group reached again along another path is walked again only where that path gives it other
    # connection settings or a greater depth (issue 41: 22 levels of [a:children] in 1 KB were 4
    # million paths, a chain of 1500 groups a RecursionError): iterative, each group once.
    done: dict[tuple[str, int, tuple], int] = {}

    def visit(group: str, body: Any, inherited: Located, where: str, level: int) -> list[tuple]:
        """One group's body: its hosts recorded, its children returned as frames to walk."""
        depth[group] = max(depth.get(group, 0), level)
        name_fits(group, where, "group")
        if body is None:
            body = Located()
        if not isinstance(body, dict):
            raise InventoryError(f"{where}: group {group} must be a mapping with hosts:, children:, vars:",
                                 hint="e.g. `gpu: {hosts: {kpro6: {ansible_host: 10.0.0.6}}}`")
        key = (group, id(body), tuple(sorted((k, repr(v)) for k, v in inherited.items())))
        if done.get(key, -1) >= level:
            return []
        done[key] = level
        for k in body:
            if k not in GROUP_KEYS:
                raise InventoryError(f"{yamlsrc.where(body, k, where)}: unknown key {k!r} in group {group}",
                                     hint=suggest(k, GROUP_KEYS) or "a group has hosts:, children: and vars:")
        raw_vars = body.get("vars")
        if raw_vars is not None and not isinstance(raw_vars, dict):
            raise InventoryError(f"{yamlsrc.where(body, 'vars', where)}: vars of group {group} must be a mapping",
                                 hint="write `key: value` lines under it")
        conn, plain = connection_vars(raw_vars or Located(), f"group {group}", set())
        merged = _new(conn)
        for layer in (inherited, conn):
            for k, value in layer.items():
                merged[k] = value
                merged.key_lines[k] = layer.key_lines.get(k, 0)
        if plain:
            group_vars[group] = yamlsrc.overlay(group_vars.get(group, {}), plain)
        hosts = body.get("hosts") or {}
        if not isinstance(hosts, dict):
            raise InventoryError(f"{yamlsrc.where(body, 'hosts', where)}: hosts of group {group} must be a mapping "
                                 "name -> settings", hint="write `hosts: {kpro6: {}}`, not a list")
        for name, settings in hosts.items():
            name_is_text(name, hosts, "host")
            if settings is None:  # `box1:` alone: remember where it is, for errors about what its groups set
                settings = Located()
                settings.file, settings.line, settings.key_lines = str(path), yamlsrc.line_of(hosts, name), {}
            name = str(name)
            first = bodies.get(name)
            here = yamlsrc.where(hosts, name, str(path))
            if first is None:
                bodies[name] = (settings, here, [(group, merged)])
            else:
                if settings and first[0] and settings != first[0]:
                    raise InventoryError(f"{here}: host {name} has settings in two groups",
                                         hint=f"keep its settings in one place (the other is at {first[1]})")
                keep = (first[0], first[1]) if first[0] or not settings else (settings, here)
                bodies[name] = (*keep, first[2] + [(group, merged)])
            own.setdefault(group, []).append(name)
        children = body.get("children") or {}
        if not isinstance(children, dict):
            raise InventoryError(f"{yamlsrc.where(body, 'children', where)}: children of group {group} must be "
                                 "a mapping name -> group", hint="write `children: {gpu: {hosts: ...}}`")
        kids.setdefault(group, [])
        own.setdefault(group, [])
        kids[group] += [str(c) for c in children]
        return [(str(c), b, merged, yamlsrc.where(children, c, where), level + 1) for c, b in children.items()]

    tops = [("all", doc["all"], Located(), yamlsrc.where(doc, "all", str(path)), 0)]
    # Ansible reads other top-level keys as groups under `all`
    tops += [(str(g), b, Located(), yamlsrc.where(doc, g, str(path)), 1) for g, b in doc.items() if g != "all"]
    stack = list(reversed(tops))
    while stack:
        stack += reversed(visit(*stack.pop()))
    kids["all"] = list(dict.fromkeys(kids.get("all", []) + [str(g) for g in doc if g != "all"]))
    groups.update({g: _members(g, own, kids) for g in own})
    # The order in which group variables are layered (later wins), as Ansible sorts a host's groups:
    # by depth, so that a child group's variables beat its parent's, then by name.
    groups = {g: groups[g] for g in sorted(groups, key=lambda g: (depth.get(g, 0), g))}
    hosts = {}
    for name, (settings, here, chain) in bodies.items():
        hosts[name] = parse_host(name, _host_node(name, settings, chain, host_keys), here)
    top_vars = group_vars.pop("all", {})
    return hosts, groups, top_vars, group_vars


def _members(group: str, own: dict[str, list[str]], kids: dict[str, list[str]]) -> list[str]:
    """The group's hosts, then its children's, depth first, each group once (names may form a cycle)."""
    out: dict[str, None] = {}
    seen = {group}
    stack = [group]
    while stack:
        g = stack.pop()
        out.update(dict.fromkeys(own.get(g, [])))
        fresh = [c for c in dict.fromkeys(kids.get(g, [])) if c not in seen]
        seen.update(fresh)
        stack += reversed(fresh)
    return list(out)


def _host_node(name: str, settings: Any, chain: list[tuple[str, Located]], host_keys: set[str]) -> Any:
    """The host's own settings over what its groups set; groups that disagree are refused."""
    if settings is not None and not isinstance(settings, dict):
        return settings  # parse_host names the shape error
    own, plain = connection_vars(settings or Located(), f"host {name}", host_keys)
    out = _new(settings if settings is not None else own)
    from_groups: dict[str, tuple[str, Any, int]] = {}
    for group, conn in chain:
        for key, value in conn.items():
            seen = from_groups.get(key)
            if seen and seen[1] != value and key not in own:
                raise InventoryError(
                    f"{conn.file}:{conn.key_lines.get(key, 0)}: host {name} gets {key} {value!r} from group {group} "
                    f"but {seen[1]!r} from group {seen[0]} (line {seen[2]})",
                    hint=f"set it on the host itself (ansible_{key if key != 'address' else 'host'})")
            from_groups.setdefault(key, (group, value, conn.key_lines.get(key, 0)))
    for key, (_group, value, line) in from_groups.items():
        out[key] = value
        out.key_lines[key] = line
    for key, value in own.items():
        out[key] = value
        out.key_lines[key] = own.key_lines.get(key, 0)
    if plain:
        out["vars"] = yamlsrc.overlay(plain, own.get("vars") or {})
    return out


def is_list_output(doc: Any) -> bool:
    """`ansible-inventory -i X --list` output: its groups at the top, every host's variables in _meta."""
    return isinstance(doc, dict) and isinstance(doc.get("_meta"), dict) and "hostvars" in doc["_meta"]


def from_list_output(doc: dict, path: Path) -> Located:
    """`ansible-inventory --list` JSON -> the YAML inventory shape read() walks. Ansible wrote it after
    its own inventory plugins, dynamic scripts and vault had done their work; each host's variables
    are already merged there (group `vars` appear only with --export), so they go on the host."""
    hostvars = doc["_meta"].get("hostvars") or {}
    if not isinstance(hostvars, dict):
        raise InventoryError(f"{yamlsrc.where(doc['_meta'], 'hostvars', str(path))}: _meta.hostvars must be a "
                             "mapping host -> variables", hint="give what `ansible-inventory -i X --list` printed")
    made: set[str] = set()

    def group(name: str, trail: tuple[str, ...]) -> Located:
        body = doc.get(name) or Located()
        if not isinstance(body, dict):
            raise InventoryError(f"{yamlsrc.where(doc, name, str(path))}: group {name} must be a mapping with "
                                 "hosts: and children: lists", hint="give what `ansible-inventory -i X --list` printed")
        out = _new(body)
        hosts = body.get("hosts") or []
        children = body.get("children") or []
        for key, value in (("hosts", hosts), ("children", children)):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise InventoryError(f"{yamlsrc.where(body, key, str(path))}: {key} of group {name} must be a list "
                                     "of names", hint="give what `ansible-inventory -i X --list` printed")
        if hosts:
            out["hosts"] = _new(body)
            for h in hosts:
                # a host's variables once, where it first appears; its other groups only list it
                out["hosts"][h] = None if h in made else (hostvars.get(h) or Located())
                made.add(h)
        if children:
            out["children"] = _new(body)
            for child in children:
                if child in trail:
                    raise InventoryError(f"{yamlsrc.where(body, 'children', str(path))}: group {child} contains "
                                         "itself", hint="give what `ansible-inventory -i X --list` printed")
                out["children"][child] = group(child, (*trail, child))
        if body.get("vars"):  # --export keeps group variables on their group
            out["vars"] = body["vars"]
        return out

    top = _new(doc)
    top["all"] = group("all", ("all",))
    orphans = [h for h in hostvars if h not in made]  # listed in _meta only: Ansible's `ungrouped`
    if orphans:
        top["all"].setdefault("hosts", _new(doc)).update({h: hostvars[h] or Located() for h in orphans})
    return top
