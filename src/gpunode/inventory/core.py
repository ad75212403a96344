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
too, and so does an Ansible INI one (inventory/ini.py turns it into that shape);
ansible_host/ansible_port/ansible_user/ansible_ssh_private_key_file map onto
address/port/user/key.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpunode import userfiles, yamlsrc
from gpunode.errors import InventoryError, preview
from gpunode.inventory import ansible, ini
from gpunode.inventory.names import name_is_text, suggest
from gpunode.yamlsrc import Located

HOST_KEYS = {"address", "port", "user", "key", "host_key", "known_hosts", "pct_path", "connection",
             "containers", "vars", "node", "become", "become_user"}
# Ansible's boolean() spellings, for `become` (an INI inventory gives text)
TRUE, FALSE = {"yes", "on", "1", "true", "y", "t"}, {"no", "off", "0", "false", "n", "f", ""}
CONTAINER_KEYS = {"gpus", "vars", "name"}
GROUP_KEYS = {"hosts", "vars"}
TOP_KEYS = {"hosts", "groups", "vars"}
# What an inventory folder's main file is called: gpunode's or Ansible's YAML, then Ansible's INI.
MAIN_FILES = ("hosts.yml", "hosts.yaml", "inventory.yml", "inventory.yaml", "hosts.ini", "inventory.ini", "hosts")


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
    #: the connection keys the inventory sets itself (user, port): the others come from
    #: ~/.ssh/config's Host entry for the address, as ssh and Ansible take them, else the defaults
    given: frozenset[str] = frozenset()
    #: log in as `user` and run every command as `become_user` through sudo (transport/become.py)
    become: bool = False
    become_user: str = "root"


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
                hint=suggest(name, self.hosts) or f"known hosts: {', '.join(sorted(self.hosts)) or 'none'}",
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

    def all_targets(self) -> list[tuple[str, int | None]]:
        """(host, vmid) of every target: each container of a host, or the host itself when it lists none."""
        out: list[tuple[str, int | None]] = []
        for name, h in self.hosts.items():
            out += [(name, vmid) for vmid in sorted(h.containers)] or [(name, None)]
        return out

    def group_targets(self, group: str, overrides: dict[str, Any] | None = None,
                      defaults: dict[str, Any] | None = None) -> list[Target]:
        if group not in self.groups:
            raise InventoryError(f"unknown group {group!r} in {self.source}",
                                 hint=suggest(group, self.groups) or "declare it under `groups:`")
        out = []
        for host in self.groups[group]:
            h = self.host(host)
            cts: list[int | None] = [*sorted(h.containers)] or [None]
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


def _check_keys(node: Any, allowed: set[str], what: str) -> None:
    if not isinstance(node, dict):
        raise InventoryError(f"{yamlsrc.where(node)}: {what} must be a mapping, got {type(node).__name__}",
                             hint="see inventory/example/hosts.yml for the shape")
    for key in node:
        if key not in allowed:
            hint = suggest(key, allowed) or f"allowed keys: {', '.join(sorted(allowed))}"
            raise InventoryError(f"{yamlsrc.where(node, key)}: unknown key {key!r} in {what}", hint=hint)


def _as_vars(node: Any, what: str, at: str = "?") -> dict[str, Any]:
    if node is None:
        return {}
    if not isinstance(node, dict):
        raise InventoryError(f"{yamlsrc.where(node, fallback=at)}: {what} must be a mapping of variables",
                             hint="write `key: value` lines under it")
    return node if isinstance(node, Located) else dict(node)  # Located keeps each key's line for errors


def _show(value: Any) -> str:
    """A value for an error message: short, and a YAML boolean said as such."""
    if isinstance(value, bool):
        return f"{value} (YAML reads yes/no/on/off/true/false as a boolean; quote it if you meant text)"
    return preview(value)


def _int(node: Any, key: str, what: str, low: int, high: int, default: int, hint: str) -> int:
    value = node.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InventoryError(f"{yamlsrc.where(node, key)}: {key} of {what} must be {low}-{high}, got {_show(value)}",
                             hint=hint)
    return value


def _text(node: Any, key: str, what: str, default: str | None, pattern: str, hint: str,
          max_len: int = 4096) -> str | None:
    value = node.get(key, default)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > max_len or not re.fullmatch(pattern, value):
        raise InventoryError(f"{yamlsrc.where(node, key)}: {key} of {what} is not valid: {_show(value)}", hint=hint)
    return value


# A DNS name (labels of 1-63 characters, 253 in all) or an IPv4/IPv6 address; never
# starting with "-", so that no address can read as an ssh option.
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
ADDRESS = rf"(?=.{{1,253}}$)(?:(?:{_LABEL}\.)*{_LABEL}\.?|[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*(?:%[A-Za-z0-9_.-]+)?)"
USER = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}"
PATH = r"[^\x00-\x1f\x7f]+"


def _containers(name: str, node: Any, where: str) -> dict[int, Container]:
    containers: dict[int, Container] = {}
    raw_cts = node.get("containers") or {}
    if isinstance(raw_cts, list):
        for item in raw_cts:
            if isinstance(item, (dict, list)):
                raise InventoryError(
                    f"{yamlsrc.where(item, None, yamlsrc.where(node, 'containers'))}: container of host {name} "
                    "written as a list item", hint="drop the `- `: write `containers: {200: {gpus: [0, 1]}}`, "
                    "or list bare vmids: `containers: [200, 201]`")
        raw_cts = {ct: None for ct in raw_cts}
    if not isinstance(raw_cts, dict):
        raise InventoryError(f"{yamlsrc.where(node, 'containers')}: containers of {name} must be a mapping "
                             "vmid -> settings", hint="e.g. `containers: {200: {gpus: [0, 1]}}`")
    for vmid, ct in raw_cts.items():
        ct_where = yamlsrc.where(raw_cts, vmid, yamlsrc.where(node, "containers", where))
        if isinstance(vmid, str) and vmid.isascii() and vmid.isdigit():
            vmid_int = int(vmid)
        elif isinstance(vmid, int) and not isinstance(vmid, bool):
            vmid_int = vmid
        else:
            raise InventoryError(f"{ct_where}: container id {_show(vmid)} of host {name} is not a whole number",
                                 hint="Proxmox vmids are integers such as 200")
        if not 100 <= vmid_int <= 999_999_999:
            raise InventoryError(f"{ct_where}: container id {vmid_int} of host {name} is out of range",
                                 hint="Proxmox vmids run from 100 to 999999999")
        if vmid_int in containers:
            raise InventoryError(f"{ct_where}: container {vmid_int} of host {name} is listed twice",
                                 hint="keep one entry")
        ct = ct if ct is not None else Located()
        _check_keys(ct, CONTAINER_KEYS, f"container {vmid_int} of host {name}")
        gpus = ct.get("gpus")
        if gpus is not None and (not isinstance(gpus, list) or len(set(map(repr, gpus))) != len(gpus) or not all(
                isinstance(g, int) and not isinstance(g, bool) and 0 <= g < 1024 for g in gpus)):
            raise InventoryError(f"{yamlsrc.where(ct, 'gpus')}: gpus of container {vmid_int} must be a list "
                                 f"of distinct GPU indices (0, 1, ...), got {_show(gpus)}",
                                 hint="e.g. `gpus: [0, 1, 2, 3]`")
        containers[vmid_int] = Container(vmid_int, tuple(gpus) if gpus is not None else None,
                                         _as_vars(ct.get("vars"), "vars"), ct_where)
    return containers


def _ipv6_or_name(address: str) -> bool:
    """A name or IPv4 address passed ADDRESS already; one with a colon must be a real IPv6 address
    (10.0.0.5:22 matches the pattern's IPv6 branch, and paramiko would fail on it)."""
    if ":" not in address:
        return True
    try:
        ipaddress.IPv6Address(address.partition("%")[0])
    except ValueError:
        return False
    return True


def _address_hint(address: Any) -> str:
    text = str(address) if isinstance(address, str) else ""
    m = re.fullmatch(r"\[?([^\]]*?)\]?:(\d{1,5})", text)
    if m and not _ipv6_or_name(text):
        return f"write the port on its own line: `address: {m.group(1)}` and `port: {m.group(2)}`"
    if "@" in text:
        user, _, rest = text.partition("@")
        return f"write the user on its own line: `address: {rest}` and `user: {user}`"
    return ("a DNS name (labels up to 63 characters, 253 in all) or an IP address; give `address:` when the "
            "inventory name is not one")


def _bool(node: Any, key: str, what: str) -> bool:
    value = node.get(key, False)
    if isinstance(value, bool):
        return value
    if isinstance(value, str | int) and str(value).strip().lower() in TRUE | FALSE:
        return str(value).strip().lower() in TRUE
    raise InventoryError(f"{yamlsrc.where(node, key)}: {key} of {what} must be true or false, got {_show(value)}",
                         hint=f"e.g. `{key}: true`")


def _parse_host(name: str, node: Any, where: str) -> Host:
    node = node if node is not None else Located()
    _check_keys(node, HOST_KEYS, f"host {name}")
    what = f"host {name}"
    containers = _containers(name, node, where)
    address = node.get("address", name)
    if not isinstance(address, str) or not re.fullmatch(ADDRESS, address) or not _ipv6_or_name(address):
        raise InventoryError(f"{yamlsrc.where(node, 'address', where)}: address of {what} is not a host name or IP "
                             f"address: {_show(address)}", hint=_address_hint(address))
    port = _int(node, "port", what, 1, 65535, 22, "use the SSH port number, e.g. 22")
    connection = node.get("connection", "ssh")
    if connection not in ("ssh", "local"):
        raise InventoryError(f"{yamlsrc.where(node, 'connection')}: connection of {name} must be ssh or local",
                             hint="`local` runs commands on this machine (e.g. on the Proxmox host itself)")
    host_key = node.get("host_key")
    if host_key is not None and not (isinstance(host_key, str) and host_key.startswith("SHA256:")):
        raise InventoryError(f"{yamlsrc.where(node, 'host_key')}: host_key of {name} must be a SHA256:... "
                             "fingerprint", hint="get it with `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`")
    known = node.get("known_hosts") or []
    known = [known] if isinstance(known, str) else known
    if not isinstance(known, list) or not all(isinstance(k, str) and re.fullmatch(PATH, k) for k in known):
        raise InventoryError(f"{yamlsrc.where(node, 'known_hosts')}: known_hosts of {name} must be a file path or "
                             f"a list of them, got {_show(node.get('known_hosts'))}",
                             hint="e.g. `known_hosts: ~/.ssh/known_hosts`")
    user = _text(node, "user", what, "root", USER, "a login name such as root or deploy")
    key = _text(node, "key", what, None, PATH, "the path of a private key, e.g. ~/.ssh/id_ed25519")
    pct_path = _text(node, "pct_path", what, "/usr/sbin/pct", "/" + PATH, "an absolute path, e.g. /usr/sbin/pct")
    pve_node = _text(node, "node", what, None, r"[A-Za-z0-9][A-Za-z0-9.-]{0,62}", "the Proxmox node name")
    become = _bool(node, "become", what)
    become_user = _text(node, "become_user", what, "root", USER, "the user sudo runs commands as, e.g. root")
    if become and connection == "local":
        raise InventoryError(f"{yamlsrc.where(node, 'become')}: become of {name} works over ssh only",
                             hint="run gpunode as root on that host, or connect to it with ssh")
    return Host(name=name, address=address, port=port, user=str(user), key=key, host_key=host_key,
                known_hosts=tuple(known), pct_path=str(pct_path), connection=connection, node=pve_node,
                containers=containers, vars=_as_vars(node.get("vars"), "vars"), where=where,
                given=frozenset(k for k in ("user", "port") if node.get(k) is not None), become=become,
                become_user=str(become_user))


def load(path: str | Path) -> Inventory:
    """Load an inventory folder (hosts.yml + group_vars/ + host_vars/) or a single YAML file."""
    src = Path(path)
    if src.is_dir():
        mains = [src / n for n in MAIN_FILES if os.path.lexists(src / n) and not (src / n).is_dir()]
        if len(mains) > 1:
            # one would be read and the other ignored without a word (issue 41: hosts.yaml beside hosts.yml)
            raise InventoryError(f"inventory folder {src} has {' and '.join(p.name for p in mains)}: only one "
                                 "would be read", hint="merge them into one file, or pass the file itself with -i")
        main = mains[0] if mains else None
        if main is None:
            raise InventoryError(f"no hosts.yml in inventory folder {src}", hint="create one; see inventory/example "
                                 "(an Ansible INI inventory there is read as hosts.ini, inventory.ini or hosts)")
        folder = src
    elif src.exists():
        main, folder = src, src.parent
    else:
        raise InventoryError(f"inventory {src} {userfiles.missing(src)}",
                             hint="pass --inventory PATH, set GPUNODE_INVENTORY, or set `inventory:` in a "
                           "gpunode.yaml (docs/config.md)")
    doc = (ini.read(main) if ini.looks_like_ini(main) else yamlsrc.load(main)) or Located()
    group_vars: dict[str, dict[str, Any]] = {}
    if ansible.is_list_output(doc):
        doc = ansible.from_list_output(doc, main)
    if ansible.is_ansible(doc):
        hosts, groups, top_vars, group_vars = ansible.read(doc, main, _parse_host, HOST_KEYS)
    else:
        _check_keys(doc, TOP_KEYS, f"inventory {main.name}")
        raw_hosts = doc.get("hosts") or {}
        if not isinstance(raw_hosts, dict):
            raise InventoryError(f"{yamlsrc.where(doc, 'hosts')}: `hosts` must be a mapping name -> settings",
                                 hint="see inventory/example/hosts.yml")
        for n in raw_hosts:
            name_is_text(n, raw_hosts, "host")
        hosts = {str(n): _parse_host(str(n), h, yamlsrc.where(raw_hosts, n)) for n, h in raw_hosts.items()}
        groups = {}
        raw_groups = doc.get("groups") or Located()
        if not isinstance(raw_groups, dict):
            raise InventoryError(f"{yamlsrc.where(doc, 'groups')}: `groups` must be a mapping name -> "
                                 f"{{hosts: [...]}}, got a {type(raw_groups).__name__}",
                                 hint="e.g. `groups: {blackwell: {hosts: [kpro6]}}`")
        for g, body in raw_groups.items():
            name_is_text(g, raw_groups, "group")
            _check_keys(body, GROUP_KEYS, f"group {g}")
            members = body.get("hosts") or []
            if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
                raise InventoryError(f"{yamlsrc.where(body, 'hosts')}: hosts of group {g} must be a list of host "
                                     f"names, got {_show(members)}", hint="e.g. `hosts: [kpro6, rented]`")
            groups[str(g)] = list(members)
            for member in groups[str(g)]:
                if member not in hosts:
                    raise InventoryError(f"{yamlsrc.where(body, 'hosts')}: group {g} names unknown host {member!r}",
                                         hint=suggest(member, hosts) or "declare the host under `hosts:`")
        top_vars = _as_vars(doc.get("vars"), "vars")
        group_vars = {str(g): _as_vars(b.get("vars"), "vars") for g, b in raw_groups.items()}
    found, files = _var_files(folder / "group_vars")
    for g, v in found.items():
        if g != "all" and g not in groups:
            raise InventoryError(f"{files[g]} is for unknown group {g!r}",
                                 hint=suggest(g, groups) or "rename the file or declare the group")
        group_vars[g] = yamlsrc.overlay(group_vars[g], v, values=merge(group_vars[g], v)) if group_vars.get(g) else v
    host_vars, files = _var_files(folder / "host_vars")
    for name in host_vars:
        if name not in hosts:
            raise InventoryError(f"{files[name]} is for unknown host {name!r}",
                                 hint=suggest(name, hosts) or "rename the file or declare the host")
    for layer in (top_vars, *group_vars.values(), *host_vars.values(), *(h.vars for h in hosts.values()),
                  *(c.vars for h in hosts.values() for c in h.containers.values())):
        yamlsrc.refuse_jinja(layer, str(main), tag_hint=not ini.looks_like_ini(main))
    return Inventory(main, hosts, groups, group_vars, top_vars, host_vars)


#: What Ansible's host_group_vars plugin reads: YAML, JSON (which YAML reads too) and files with no
#: extension (group_vars/gpu); a name with another dot in it is a name (host_vars/gpu1.example.com).
VAR_SUFFIXES = (".yml", ".yaml", ".json")


def _var_name(f: Path) -> str:
    return f.stem if f.suffix in VAR_SUFFIXES else f.name


def _var_files(folder: Path) -> tuple[dict[str, dict[str, Any]], dict[str, Path]]:
    """group_vars/<g>.yml (or .yaml, .json, or no extension, as Ansible reads them), and Ansible's
    folder form group_vars/<g>/*.yml (vars.yml beside a vault.yml), merged in name order. Anything
    else in such a folder is refused by name rather than skipped: a skipped file may hold the
    secret the servers need. Also each name's first file or folder, for messages."""
    out: dict[str, dict[str, Any]] = {}
    first: dict[str, Path] = {}
    if not folder.is_dir():
        return out, first
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        files = [entry] if not entry.is_dir() else [f for f in sorted(entry.iterdir()) if not f.name.startswith(".")]
        for f in files:
            if f.is_dir():
                raise InventoryError(f"{f}: a folder inside {entry}; gpunode reads the YAML files directly in it",
                                     hint=f"move its files up into {entry}")
            if f.suffix not in VAR_SUFFIXES and (entry.is_dir() and f.suffix):
                raise InventoryError(f"{f}: not a YAML file (.yml, .yaml, .json or no extension, as Ansible reads "
                                     "them), so no variable in it would be read",
                                     hint=f"rename it to {f.stem}.yml, or move it out of {folder}")
        name = entry.name if entry.is_dir() else _var_name(entry)
        layers = [_as_vars(yamlsrc.load(f), f"variables file {f}", f"{f}:1") for f in files]
        if name in out:
            layers.insert(0, out[name])
        first.setdefault(name, entry)
        out[name] = _join(layers, folder / name)
    return out, first


def _join(layers: list[dict[str, Any]], what: Path) -> dict[str, Any]:
    """The variables of one group or host from several files, each key remembering its file and line;
    a key set in two of them is refused (which one wins would be a guess)."""
    if len(layers) == 1:
        return layers[0]
    out = Located()
    out.file, out.line, out.key_lines, out.key_files = str(what), 0, {}, {}
    for layer in layers:
        for key, value in layer.items():
            if key in out:
                raise InventoryError(f"{yamlsrc.where(layer, key)}: {key} is set for {what.name} in both "
                                     f"{yamlsrc.where(out, key)} and here", hint="keep one of them")
            out[key] = value
            out.key_lines[key] = yamlsrc.line_of(layer, key)
            out.key_files[key] = yamlsrc.where(layer, key).rpartition(":")[0] or str(what)
    return out
