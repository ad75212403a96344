"""Create or update one LXC container through the API, idempotently.

The desired container is compared with GET .../config key by key; only what differs is
PUT, with the config's `digest` so that a concurrent edit fails instead of being lost.
onboard manages hostname, memory, swap, cores, the mount points it was given (matched by
their path in the container) and NVIDIA devN entries; other entries are left alone.
Create-only settings (template, rootfs, unprivileged, features, net0) never cause a PUT.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from gpunode.errors import PveError
from gpunode.pve import tasks

MANAGED_SCALARS = ("hostname", "memory", "swap", "cores")


@dataclass(frozen=True)
class MountPoint:
    host: str       # host folder (a bind mount)
    target: str     # path in the container
    ro: bool = True

    def value(self) -> str:
        return f"{self.host},mp={self.target}" + (",ro=1" if self.ro else "")


@dataclass(frozen=True)
class Desired:
    vmid: int
    hostname: str
    memory: int                      # MiB
    swap: int = 0                    # MiB
    cores: int | None = None         # None: not set (all host cores)
    mounts: tuple[MountPoint, ...] = ()
    devices: tuple[str, ...] = ()    # device node paths, e.g. /dev/nvidia0
    template: str = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"
    rootfs: str = "local-lvm:32"     # storage:size-in-GiB
    net0: str | None = "name=eth0,bridge=vmbr0,ip=dhcp"
    unprivileged: bool = True
    device_root: str = ""            # where the host's /dev/nvidia* live ("" but in the lab: host_root)


@dataclass
class Plan:
    vmid: int
    node: str
    create: dict[str, Any] | None = None         # POST parameters when the container is new
    set: dict[str, str] = field(default_factory=dict)
    old: dict[str, str | None] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)
    start: bool = False
    digest: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def changes(self) -> bool:
        return bool(self.create or self.set or self.delete or self.start)

    def lines(self) -> list[str]:
        ct = f"CT {self.vmid} on node {self.node}"
        if self.create:
            out = [f"create {ct}:"]
            out += [f"  {k}: {v}" for k, v in sorted(self.create.items()) if k != "vmid"]
        elif self.set or self.delete:
            out = [f"update {ct}:"]
            out += [f"  {k}: {self.old.get(k) or '(unset)'} -> {v}" for k, v in sorted(self.set.items())]
            out += [f"  {k}: {self.old.get(k)} -> (deleted)" for k in self.delete]
        else:
            out = [f"{ct}: config already as wanted"]
        if self.start:
            out.append(f"start {ct}")
        return out + [f"note: {n}" for n in self.notes]


# -- property strings -------------------------------------------------------------------------

def parse_prop(value: Any, default_key: str) -> dict[str, str]:
    """A PVE property string ("path,key=v,...") as a dict; the bare first item is default_key."""
    out: dict[str, str] = {}
    for i, item in enumerate(str(value).split(",")):
        key, sep, val = item.partition("=")
        if not sep:
            if i == 0:
                out[default_key] = item
            continue
        out[key.strip()] = val.strip()
    return out


def _same_mount(current: Any, wanted: MountPoint) -> bool:
    cur = parse_prop(current, "volume")
    ro = cur.get("ro", "0") in ("1", "on", "yes", "true")
    return cur.get("volume") == wanted.host and cur.get("mp") == wanted.target and ro == wanted.ro


def _slots(conf: dict[str, Any], prefix: str) -> dict[int, Any]:
    return {int(k[len(prefix):]): v for k, v in conf.items() if k.startswith(prefix) and k[len(prefix):].isdigit()}


def _free(used: set[int], limit: int) -> int:
    for i in range(limit):
        if i not in used:
            used.add(i)
            return i
    raise PveError(f"no free slot left (all {limit} in use)", hint="remove unused entries from the CT config")


# -- the pure part ----------------------------------------------------------------------------

def create_params(d: Desired) -> dict[str, Any]:
    params: dict[str, Any] = {"vmid": d.vmid, "ostemplate": d.template, "hostname": d.hostname,
                              "memory": d.memory, "swap": d.swap, "rootfs": d.rootfs,
                              "unprivileged": int(d.unprivileged), "start": 0}
    if d.unprivileged:
        params["features"] = "nesting=1"  # systemd in Debian 12+ guests wants it in unprivileged CTs
    if d.cores is not None:
        params["cores"] = d.cores
    if d.net0:
        params["net0"] = d.net0
    for i, m in enumerate(d.mounts):
        params[f"mp{i}"] = m.value()
    for i, dev in enumerate(d.devices):
        params[f"dev{i}"] = dev
    return params


def plan_update(conf: dict[str, Any], running: bool, d: Desired, node: str, adopt: bool = False) -> Plan:
    """Compare an existing container's config with the desired one (pure)."""
    plan = Plan(d.vmid, node, digest=conf.get("digest"))
    have_name = str(conf.get("hostname", ""))
    if have_name != d.hostname and not adopt:
        raise PveError(f"CT {d.vmid} already exists on node {node} as {have_name or '(no hostname)'!r}, "
                       f"not {d.hostname!r}; refusing to take it over", target=f"{node}/{d.vmid}",
                       hint=f"pick a free vmid, or pass --hostname {have_name} (or --adopt) if it is the one")
    if conf.get("lock"):
        raise PveError(f"CT {d.vmid} on node {node} is locked ({conf['lock']})", target=f"{node}/{d.vmid}",
                       hint=f"wait for the running {conf['lock']} to end, or `pct unlock {d.vmid}` on the node")
    wanted = {"hostname": d.hostname, "memory": str(d.memory), "swap": str(d.swap)}
    if d.cores is not None:
        wanted["cores"] = str(d.cores)
    for key, value in wanted.items():
        have = conf.get(key)
        if have is None or str(have) != value:
            plan.set[key] = value
            plan.old[key] = None if have is None else str(have)

    mps = _slots(conf, "mp")
    used = set(mps)
    for m in d.mounts:
        slot = next((i for i, v in sorted(mps.items()) if parse_prop(v, "volume").get("mp") == m.target), None)
        if slot is None:
            slot = _free(used, 256)
        elif _same_mount(mps[slot], m):
            continue
        plan.set[f"mp{slot}"] = m.value()
        plan.old[f"mp{slot}"] = None if slot not in mps else str(mps[slot])
    ours = {m.target for m in d.mounts}
    for i, v in sorted(mps.items()):
        if parse_prop(v, "volume").get("mp") not in ours:
            plan.notes.append(f"mp{i} ({v}) is not one of onboard's mounts; left as is")

    devs = _slots(conf, "dev")
    by_path = {parse_prop(v, "path").get("path"): i for i, v in devs.items()}
    used_dev = set(devs)
    for path in d.devices:
        if path not in by_path:
            slot = _free(used_dev, 256)
            plan.set[f"dev{slot}"] = path
            plan.old[f"dev{slot}"] = None
    for dev_path, i in sorted(by_path.items(), key=lambda kv: kv[1]):
        if dev_path and dev_path.startswith(d.device_root + "/dev/nvidia") and dev_path not in d.devices:
            plan.delete.append(f"dev{i}")
            plan.old[f"dev{i}"] = str(devs[i])
    plan.start = not running
    return plan


# -- talking to the API -----------------------------------------------------------------------

def exists(client: Any, node: str, vmid: int) -> dict[str, Any] | None:
    for ct in client.get(f"nodes/{node}/lxc"):
        if str(ct.get("vmid")) == str(vmid):
            return dict(ct)
    return None


def plan(client: Any, node: str, d: Desired, adopt: bool = False) -> Plan:
    client.check_node(node)
    listed = exists(client, node, d.vmid)
    if listed is None:
        return Plan(d.vmid, node, create=create_params(d), start=True)
    conf = client.get(f"nodes/{node}/lxc/{d.vmid}/config")
    return plan_update(conf, listed.get("status") == "running", d, node, adopt)


def apply(client: Any, p: Plan, *, progress: tasks.Progress | None = None, timeout: float = 600,
          before_start: Callable[[], None] | None = None) -> list[str]:
    """Carry out a plan; returns notes (e.g. changes Proxmox left pending until a restart).

    before_start runs after the config is written and before the container starts (classic
    passthrough lines are written there, over SSH)."""
    base = f"nodes/{p.node}/lxc"
    notes: list[str] = []
    if p.create:
        upid = client.call("POST", base, **p.create)
        tasks.wait(client, upid, what=f"create CT {p.vmid}", timeout=timeout, progress=progress)
    elif p.set or p.delete:
        params: dict[str, Any] = dict(p.set)
        if p.delete:
            params["delete"] = ",".join(p.delete)
        if p.digest:
            params["digest"] = p.digest
        client.call("PUT", f"{base}/{p.vmid}/config", **params)
        pending = [e for e in client.get(f"{base}/{p.vmid}/pending")
                   if "pending" in e or e.get("delete")]
        if pending:
            keys = ", ".join(str(e["key"]) for e in pending)
            notes.append(f"Proxmox keeps {keys} pending until CT {p.vmid} restarts (`pct reboot {p.vmid}`)")
    if before_start is not None:
        before_start()
    if p.start:
        upid = client.call("POST", f"{base}/{p.vmid}/status/start")
        tasks.wait(client, upid, what=f"start CT {p.vmid}", timeout=timeout, progress=progress)
        wait_running(client, p.node, p.vmid, timeout=60)
    return notes


def wait_running(client: Any, node: str, vmid: int, timeout: float = 60) -> None:
    """After a start task: poll until the container says running (every 0.2 s, up to timeout)."""
    st = Retrying(retry=retry_if_result(lambda st: st.get("status") != "running"), stop=stop_after_delay(timeout),
                  wait=wait_fixed(0.2), retry_error_callback=tasks.last_result)(
        client.get, f"nodes/{node}/lxc/{vmid}/status/current")
    if st.get("status") != "running":
        raise PveError(f"CT {vmid} on node {node} is {st.get('status')} after its start task succeeded",
                       hint=f"look at `pct start {vmid} --debug` on the node", target=f"{node}/{vmid}")
