"""Classic GPU passthrough for Proxmox VE before devN: raw lxc.* lines in /etc/pve/lxc/<vmid>.conf.

    lxc.cgroup2.devices.allow: c 195:* rwm          # nvidia0..N, nvidiactl, nvidia-modeset
    lxc.cgroup2.devices.allow: c 238:* rwm          # nvidia-uvm: a DYNAMIC major
    lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file

The majors come from the host's /proc/devices, never from memory: nvidia-uvm's (and
nvidia-caps') major is allocated at module load and differs between hosts and kernels
(238 on the recorded H200, 510/511 elsewhere: tests/data/pve/proc-devices/). The main
driver's name there is "nvidia-frontend" before R550.40 and "nvidia" after. PVE 7+ runs
the unified cgroup hierarchy (lxc.cgroup2.*); PVE 6 used lxc.cgroup.*.

The API cannot write lxc.* keys (pve-container refuses them), so onboard edits the file
over SSH: `merge()` is the pure part.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpunode.errors import PveError
from gpunode.pve.hostfacts import HostFacts

MAIN = ("nvidia-frontend", "nvidia")  # /proc/devices name of the 195 major, old and new


def _major_name(path: str) -> tuple[str, ...]:
    if path.startswith("/dev/nvidia-uvm"):
        return ("nvidia-uvm",)
    if path.startswith("/dev/nvidia-caps/"):
        return ("nvidia-caps",)
    return MAIN


def allow_key(facts: HostFacts) -> str:
    return "lxc.cgroup.devices.allow" if facts.pve and facts.pve[0] < 7 else "lxc.cgroup2.devices.allow"


def lines(facts: HostFacts, paths: list[str], host: str = "") -> list[str]:
    """The lxc.* lines passing these device nodes (from devices.passthrough) into a container."""
    majors: list[int] = []
    for path in paths:
        names = _major_name(path)
        major = next((facts.majors[n] for n in names if n in facts.majors), None)
        if major is None:
            raise PveError(f"{' or '.join(names)} is not in /proc/devices on host {host}, so the major of "
                           f"{path} is unknown", target=host,
                           hint="load the module first (nvidia-modprobe -u -c=0 loads nvidia-uvm and makes its "
                           "nodes), then run onboard again")
        if major not in majors:
            majors.append(major)
    key = allow_key(facts)
    out = [f"{key}: c {m}:* rwm" for m in majors]
    caps = False
    for path in paths:
        if path.startswith("/dev/nvidia-caps/"):
            caps = True
            continue
        out.append(f"lxc.mount.entry: {facts.host_path(path)} {path.lstrip('/')} none bind,optional,create=file")
    if caps:
        out.append(f"lxc.mount.entry: {facts.host_path('/dev/nvidia-caps')} dev/nvidia-caps none "
                   "bind,optional,create=dir")
    return out


@dataclass(frozen=True)
class Merge:
    text: str
    added: tuple[str, ...]
    removed: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)


def _is_ours(line: str, facts: HostFacts) -> bool:
    """An NVIDIA line onboard manages: a /dev/nvidia* mount entry, or a device allow whose major
    no driver of the host holds any more (a dynamic major from an earlier boot)."""
    key, _, value = line.partition(":")
    key, value = key.strip(), value.strip()
    if key == "lxc.mount.entry":
        return value.startswith(facts.host_path("/dev/nvidia"))
    if key in ("lxc.cgroup2.devices.allow", "lxc.cgroup.devices.allow"):
        parts = value.split()
        if len(parts) == 3 and parts[0] == "c" and parts[1].endswith(":*"):
            major = parts[1][:-2]
            return major.isdigit() and int(major) not in facts.majors.values()
    return False


def merge(conf: str, wanted: list[str], facts: HostFacts) -> Merge:
    """The config text with `wanted` present (before any [snapshot] section), stale NVIDIA lines gone."""
    all_lines = conf.splitlines()
    cut = next((i for i, line in enumerate(all_lines) if line.startswith("[")), len(all_lines))
    current, rest = all_lines[:cut], all_lines[cut:]
    while current and not current[-1].strip():
        current.pop()  # the blank line before a [snapshot] section is put back below
    have = {line.strip() for line in current}
    removed = tuple(line for line in current if line.strip() not in wanted and _is_ours(line, facts))
    kept = [line for line in current if line not in removed]
    added = tuple(line for line in wanted if line not in have)
    out = kept + list(added) + ([""] + rest if rest else [])
    return Merge("\n".join(out) + "\n", added, removed)
