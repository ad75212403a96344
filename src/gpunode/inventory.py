"""Inventory: YAML -> typed hosts, containers and groups, with variable layering.

Layout of an inventory folder (or a single file):

    hosts.yml            hosts, their containers, groups, and `vars` for all
    group_vars/<g>.yml   variables of group g ("all" for every target)
    host_vars/<h>.yml    variables of host h

Variables are merged in this order, later wins (see docs/inventory.md):
role defaults < `vars:` of hosts.yml < group_vars/all.yml < groups (in the
order they are declared) < host `vars:` < host_vars/<h>.yml < container
`vars:` < --set on the command line.

An Ansible YAML inventory (`all:` with `hosts:`/`children:`/`vars:`) loads
too; ansible_host/ansible_port/ansible_user/ansible_ssh_private_key_file map
onto address/port/user/key.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpunode import yamlsrc
from gpunode.errors import InventoryError
from gpunode.yamlsrc import Located

HOST_KEYS = {"address", "port", "user", "key", "host_key", "known_hosts", "pct_path", "connection",
             "containers", "vars", "node"}
CONTAINER_KEYS = {"gpus", "vars", "name"}
GROUP_KEYS = {"hosts", "vars"}
TOP_KEYS = {"hosts", "groups", "vars"}
ANSIBLE_ALIASES = {"ansible_host": "address", "ansible_port": "port", "ansible_user": "user",
                   "ansible_ssh_private_key_file": "key"}


@dataclass(frozen=True)
class Container:
    vmid: int
    gpus: tuple[int, ...] | None
    vars: dict[str, Any]
    where: str


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    port: int = 22
    user: str = "root"
    key: str | None = None
    host_key: str | None = None
    known_hosts: tuple[str, ...] = ()
    pct_path: str = "/usr/sbin/pct"
    connection: str = "ssh"          # "ssh" or "local"
    node: str | None = None          # Proxmox node name, for the API (defaults to the host name)
    containers: dict[int, Container] = field(default_factory=dict)
    vars: dict[str, Any] = field(default_factory=dict)
    where: str = "?"


@dataclass(frozen=True)
class Target:
    """One thing to provision: a host, or a container on a host."""

    host: Host
    container: Container | None
    vars: dict[str, Any]
    origins: dict[str, str] = field(default_factory=dict)  # variable -> file:line, "--set" or "role defaults"

    @property
    def name(self) -> str:
        return f"{self.host.name}/{self.container.vmid}" if self.container else self.host.name


@dataclass
class Inventory:
    source: Path
    hosts: dict[str, Host]
    groups: dict[str, list[str]]
    group_vars: dict[str, dict[str, Any]]
    top_vars: dict[str, Any]
    host_vars_files: dict[str, dict[str, Any]]

    def host(self, name: str) -> Host:
        if name not in self.hosts:
            raise InventoryError(
                f"unknown host {name!r} in {self.source}",
                hint=_suggest(name, self.hosts) or f"known hosts: {', '.join(sorted(self.hosts)) or 'none'}",
            )
        return self.hosts[name]

    def target(self, host: str, ct: int | None = None, overrides: dict[str, Any] | None = None,
               defaults: dict[str, Any] | None = None) -> Target:
        h = self.host(host)
        container = None
        if ct is not None:
            if int(ct) not in h.containers:
                listed = ", ".join(str(v) for v in sorted(h.containers)) or "none"
                raise InventoryError(
                    f"container {ct} is not in the inventory for host {host} ({h.where})",
                    hint=f"containers listed for {host}: {listed}; add it under `containers:` "
                    f"or onboard it with `inv onboard --host {host} --ct {ct}`",
                )
            container = h.containers[int(ct)]
        layers: list[dict[str, Any]] = [defaults or {}, self.top_vars, self.group_vars.get("all", {})]
        for group, members in self.groups.items():
            if host in members and group != "all":
                layers.append(self.group_vars.get(group, {}))
        layers += [h.vars, self.host_vars_files.get(host, {})]
        if container:
            layers.append(container.vars)
            if container.gpus is not None:
                layers.append({"gpus": list(container.gpus)})
        layers.append(overrides or {})
        fallback = {0: "role defaults", len(layers) - 1: "--set"}
        origins = {key: yamlsrc.where(layer, key, fallback.get(i, container.where if container else h.where))
                   for i, layer in enumerate(layers) for key in layer}
        return Target(host=h, container=container, vars=merge(*layers), origins=origins)

    def group_targets(self, group: str, overrides: dict[str, Any] | None = None,
                      defaults: dict[str, Any] | None = None) -> list[Target]:
        if group not in self.groups:
            raise InventoryError(f"unknown group {group!r} in {self.source}",
                                 hint=_suggest(group, self.groups) or "declare it under `groups:`")
        out = []
        for host in self.groups[group]:
            h = self.host(host)
            cts = sorted(h.containers) or [None]
            out += [self.target(host, ct, overrides, defaults) for ct in cts]
        return out


def merge(*layers: dict[str, Any]) -> dict[str, Any]:
    """Merge variable layers, later wins; nested mappings merge key by key."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = merge(out[key], value)
            else:
                out[key] = value
    return out


def _suggest(name: str, known: Any) -> str:
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1)
    return f"did you mean {close[0]!r}?" if close else ""


def _check_keys(node: Any, allowed: set[str], what: str) -> None:
    if not isinstance(node, dict):
        raise InventoryError(f"{yamlsrc.where(node)}: {what} must be a mapping, got {type(node).__name__}",
                             hint="see inventory/example/hosts.yml for the shape")
    for key in node:
        if key not in allowed:
            hint = _suggest(key, allowed) or f"allowed keys: {', '.join(sorted(allowed))}"
            raise InventoryError(f"{yamlsrc.where(node, key)}: unknown key {key!r} in {what}", hint=hint)


def _as_vars(node: Any, what: str) -> dict[str, Any]:
    if node is None:
        return {}
    if not isinstance(node, dict):
        raise InventoryError(f"{yamlsrc.where(node)}: {what} must be a mapping of variables",
                             hint="write `key: value` lines under it")
    return node if isinstance(node, Located) else dict(node)  # Located keeps each key's line for errors


def _parse_host(name: str, node: Any, where: str, ansible: bool = False) -> Host:
    node = node if node is not None else Located()
    if ansible and isinstance(node, dict):
        node = _translate_ansible(node)
    _check_keys(node, HOST_KEYS, f"host {name}")
    containers: dict[int, Container] = {}
    raw_cts = node.get("containers") or {}
    if isinstance(raw_cts, list):
        raw_cts = {ct: None for ct in raw_cts}
    if not isinstance(raw_cts, dict):
        raise InventoryError(f"{yamlsrc.where(node, 'containers')}: containers of {name} must be a mapping "
                             "vmid -> settings", hint="e.g. `containers: {200: {gpus: [0, 1]}}`")
    for vmid, ct in raw_cts.items():
        ct_where = yamlsrc.where(raw_cts, vmid, where)
        try:
            vmid_int = int(vmid)
        except (TypeError, ValueError):
            raise InventoryError(f"{ct_where}: container id {vmid!r} of host {name} is not a number",
                                 hint="Proxmox vmids are integers such as 200") from None
        if not 100 <= vmid_int <= 999_999_999:
            raise InventoryError(f"{ct_where}: container id {vmid_int} of host {name} is out of range",
                                 hint="Proxmox vmids run from 100 to 999999999")
        ct = ct if ct is not None else Located()
        _check_keys(ct, CONTAINER_KEYS, f"container {vmid_int} of host {name}")
        gpus = ct.get("gpus")
        if gpus is not None and (not isinstance(gpus, list) or not all(isinstance(g, int) for g in gpus)):
            raise InventoryError(f"{yamlsrc.where(ct, 'gpus')}: gpus of container {vmid_int} must be a list "
                                 "of GPU indices", hint="e.g. `gpus: [0, 1, 2, 3]`")
        containers[vmid_int] = Container(vmid_int, tuple(gpus) if gpus is not None else None,
                                         _as_vars(ct.get("vars"), "vars"), ct_where)
    address = node.get("address", name)
    port = node.get("port", 22)
    if not isinstance(port, int) or not 0 < port < 65536:
        raise InventoryError(f"{yamlsrc.where(node, 'port')}: port of host {name} must be 1-65535, got {port!r}",
                             hint="use the SSH port number, e.g. 22")
    connection = node.get("connection", "ssh")
    if connection not in ("ssh", "local"):
        raise InventoryError(f"{yamlsrc.where(node, 'connection')}: connection of {name} must be ssh or local",
                             hint="`local` runs commands on this machine (e.g. on the Proxmox host itself)")
    host_key = node.get("host_key")
    if host_key is not None and not str(host_key).startswith("SHA256:"):
        raise InventoryError(f"{yamlsrc.where(node, 'host_key')}: host_key of {name} must be a SHA256:... "
                             "fingerprint", hint="get it with `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`")
    known = node.get("known_hosts") or ()
    known = (known,) if isinstance(known, str) else tuple(known)
    return Host(name=name, address=str(address), port=port, user=str(node.get("user", "root")),
                key=node.get("key"), host_key=host_key, known_hosts=known,
                pct_path=str(node.get("pct_path", "/usr/sbin/pct")), connection=connection,
                node=node.get("node"), containers=containers, vars=_as_vars(node.get("vars"), "vars"),
                where=where)


def _translate_ansible(node: dict) -> dict:
    out = Located()
    out.file = getattr(node, "file", "?")
    out.line = getattr(node, "line", 0)
    out.key_lines = {}
    extra_vars = {}
    for key, value in node.items():
        line = node.key_lines.get(key, 0) if isinstance(node, Located) else 0
        if key in ANSIBLE_ALIASES:
            out[ANSIBLE_ALIASES[key]] = value
            out.key_lines[ANSIBLE_ALIASES[key]] = line
        elif key.startswith("ansible_"):
            continue  # other connection settings of Ansible have no meaning here
        elif key in HOST_KEYS:
            out[key] = value
            out.key_lines[key] = line
        else:
            extra_vars[key] = value  # Ansible host vars sit beside connection settings
    if extra_vars:
        out["vars"] = {**extra_vars, **(out.get("vars") or {})}
    return out


def load(path: str | Path) -> Inventory:
    """Load an inventory folder (hosts.yml + group_vars/ + host_vars/) or a single YAML file."""
    src = Path(path)
    if src.is_dir():
        main = next((src / n for n in ("hosts.yml", "hosts.yaml", "inventory.yml") if (src / n).exists()), None)
        if main is None:
            raise InventoryError(f"no hosts.yml in inventory folder {src}", hint="create one; see inventory/example")
        folder = src
    elif src.exists():
        main, folder = src, src.parent
    else:
        raise InventoryError(f"inventory {src} does not exist",
                             hint="pass --inventory PATH or set GPUNODE_INVENTORY")
    doc = yamlsrc.load(main) or Located()
    group_vars: dict[str, dict[str, Any]] = {}
    if isinstance(doc, dict) and "all" in doc and "hosts" not in doc:
        hosts, groups, top_vars, group_vars = _from_ansible(doc["all"], main)
    else:
        _check_keys(doc, TOP_KEYS, f"inventory {main.name}")
        raw_hosts = doc.get("hosts") or {}
        if not isinstance(raw_hosts, dict):
            raise InventoryError(f"{yamlsrc.where(doc, 'hosts')}: `hosts` must be a mapping name -> settings",
                                 hint="see inventory/example/hosts.yml")
        hosts = {str(n): _parse_host(str(n), h, yamlsrc.where(raw_hosts, n)) for n, h in raw_hosts.items()}
        groups = {}
        for g, body in (doc.get("groups") or {}).items():
            _check_keys(body, GROUP_KEYS, f"group {g}")
            groups[str(g)] = [str(h) for h in body.get("hosts") or []]
            for member in groups[str(g)]:
                if member not in hosts:
                    raise InventoryError(f"{yamlsrc.where(body, 'hosts')}: group {g} names unknown host {member!r}",
                                         hint=_suggest(member, hosts) or "declare the host under `hosts:`")
        top_vars = _as_vars(doc.get("vars"), "vars")
        group_vars = {str(g): _as_vars(b.get("vars"), "vars") for g, b in (doc.get("groups") or {}).items()}
    for g, v in _var_files(folder / "group_vars").items():
        group_vars[g] = merge(group_vars.get(g, {}), v)
    host_vars = _var_files(folder / "host_vars")
    for name in host_vars:
        if name not in hosts:
            raise InventoryError(f"{folder / 'host_vars' / name}.yml is for unknown host {name!r}",
                                 hint=_suggest(name, hosts) or "rename the file or declare the host")
    return Inventory(main, hosts, groups, group_vars, top_vars, host_vars)


def _var_files(folder: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    if folder.is_dir():
        for f in sorted(folder.glob("*.y*ml")):
            out[f.stem] = _as_vars(yamlsrc.load(f), f"variables file {f}")
    return out


def _from_ansible(node: Any, path: Path):
    """Walk an Ansible YAML inventory: -> hosts, groups, vars of `all`, vars of the other groups."""
    hosts: dict[str, Host] = {}
    groups: dict[str, list[str]] = {}
    group_vars: dict[str, dict[str, Any]] = {}

    def walk(group: str, body: Any) -> list[str]:
        body = body or {}
        members: list[str] = []
        for name, settings in (body.get("hosts") or {}).items():
            name = str(name)
            if name not in hosts:
                hosts[name] = _parse_host(name, settings, yamlsrc.where(body.get("hosts"), name, str(path)),
                                          ansible=True)
            members.append(name)
        for child, child_body in (body.get("children") or {}).items():
            members += walk(str(child), child_body)
        groups[group] = list(dict.fromkeys(members))
        if body.get("vars"):
            group_vars[group] = _as_vars(body.get("vars"), "vars")
        return members

    walk("all", node)
    top_vars = group_vars.pop("all", {})
    return hosts, groups, top_vars, group_vars
