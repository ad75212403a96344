"""A Proxmox container config (/etc/pve/lxc/N.conf, or `pct config N` output) read as PVE reads it.

The line rules follow pve-container's PVE::LXC::Config::parse_pct_config: blank lines are
skipped; `#...` lines are the description; `lxc.KEY: value` (or `lxc.KEY = value`) are raw LXC
keys, kept in order because they repeat; `key: value` are PVE keys (the last one wins); a
`[name]` line starts a snapshot and `[pve:pending]` the pending changes, neither of which is
the running config, so only the lines before the first section are kept. A line PVE would
refuse ("unable to parse config") is an error here too, with its file and line number:
auditing the rest would report on a config PVE does not read the same way.

Values that the audit looks into (devN, mpN, rootfs, lxc.mount.entry, devices.allow) are
parsed by the helpers below, each raising LxcConfError with the line it came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from gpunode.errors import GpunodeError

# The three line shapes of parse_pct_config, as written there (Config.pm).
_SECTION = re.compile(r"^\[([a-z][a-z0-9_\-]+|pve:pending)\]\s*$", re.IGNORECASE)
_LXC = re.compile(r"^(lxc\.[a-z0-9_\-.]+)(:|\s*=)\s*(.*?)\s*$")
_KEY = re.compile(r"^([a-z][a-z_]*\d*):\s*(.+?)\s*$")
_INDEXED = re.compile(r"^(dev|mp)(\d+)$")
# Keys only a QEMU VM config has (qemu-server's PVE/QemuServer.pm): disks, passed-through PCI
# devices, the machine type and VM identity. A container config (PVE writes rootfs) has none.
_QEMU_KEY = re.compile(r"^(hostpci|scsi|virtio|sata|ide|efidisk|tpmstate)\d+$|^(vmgenid|smbios1|scsihw|bootdisk|"
                       r"machine|bios|sockets|vga|kvm)$")
_ALLOW = re.compile(r"^([cb])\s+(\d+|\*):(\d+|\*)(?:\s+([rwm]+))?$")

SHAPES = "PVE reads `key: value`, `lxc.key: value`, `[snapshot]` and `# comment` lines"


class LxcConfError(GpunodeError):
    """The config text cannot be read the way PVE reads it."""


@dataclass(frozen=True)
class Line:
    """One key line of the current section: where it is, and what it says."""

    number: int
    key: str
    value: str
    text: str


@dataclass
class LxcConf:
    source: str
    lines: list[Line] = field(default_factory=list)
    description: str = ""
    snapshots: list[str] = field(default_factory=list)
    pending: bool = False

    def get(self, key: str) -> Line | None:
        """A PVE key's line; the last one wins, as in PVE's hash."""
        found = None
        for line in self.lines:
            if line.key == key:
                found = line
        return found

    def value(self, key: str, default: str = "") -> str:
        line = self.get(key)
        return line.value if line else default

    def raw(self, key: str) -> list[Line]:
        """Every `lxc.*` line of this key, in file order."""
        return [line for line in self.lines if line.key == key]

    def indexed(self, kind: str) -> list[Line]:
        """devN or mpN lines (kind "dev" or "mp"), the last of each index, by index."""
        by_index: dict[int, Line] = {}
        for line in self.lines:
            m = _INDEXED.match(line.key)
            if m and m.group(1) == kind:
                by_index[int(m.group(2))] = line
        return [by_index[i] for i in sorted(by_index)]

    @property
    def complete(self) -> bool:
        """A whole container config (PVE always writes rootfs), not a posted fragment of lxc.* lines."""
        return self.get("rootfs") is not None

    @property
    def qemu_keys(self) -> list[str]:
        """The QEMU-only keys of a VM config (/etc/pve/qemu-server/N.conf); empty for a container's."""
        if self.complete:
            return []
        return [line.key for line in self.lines if _QEMU_KEY.match(line.key)]

    def error(self, line: Line | int, problem: str, hint: str = "") -> LxcConfError:
        number = line.number if isinstance(line, Line) else line
        return LxcConfError(f"{self.source}:{number}: {problem}", hint=hint)


def parse_text(text: str, source: str) -> LxcConf:
    conf = LxcConf(source=source)
    description: list[str] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        section = _SECTION.match(raw)
        if section:
            if section.group(1).lower() == "pve:pending":
                conf.pending = True
            else:
                conf.snapshots.append(section.group(1))
            continue
        if conf.pending or conf.snapshots:
            continue  # not the running config; PVE keeps these apart too
        if raw.startswith("#"):
            description.append(raw[1:])
            continue
        m = _LXC.match(raw)
        if m:
            conf.lines.append(Line(number, m.group(1), m.group(3), raw.rstrip("\r")))
            continue
        m = _KEY.match(raw)
        if m:
            value = m.group(2).strip()
            if m.group(1) == "description":
                description.append(value)
            conf.lines.append(Line(number, m.group(1), value, raw.rstrip("\r")))
            continue
        shown = raw if len(raw) <= 80 else raw[:77] + "..."
        raise conf.error(number, f"cannot read line {shown!r}", hint=SHAPES + "; a key needs a value after the colon")
    conf.description = "\n".join(description)
    return conf


def read_file(path: str | Path) -> LxcConf:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise LxcConfError(f"{p}: cannot read the file ({exc.strerror or exc})",
                           hint="give a container config such as /etc/pve/lxc/200.conf, or `pct config 200` "
                           "saved to a file") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        number = data[: exc.start].count(b"\n") + 1
        raise LxcConfError(f"{p}:{number}: not UTF-8 text (byte 0x{data[exc.start]:02x})",
                           hint="PVE writes its configs as UTF-8; is this a container config?") from None
    return parse_text(text, str(p))


# -- values ------------------------------------------------------------------------------------

def property_string(conf: LxcConf, line: Line, default_key: str) -> dict[str, str]:
    """`a,b=c,d=e` as PVE's parse_property_string reads it: the bare part is the default key."""
    out: dict[str, str] = {}
    for part in line.value.split(","):
        key, sep, val = part.partition("=")
        if not sep:
            key, val = default_key, part
        key = key.strip()
        if not key or key in out:
            problem = f"{key} given twice" if key else "an empty part"
            example = "dev0: /dev/nvidia0,gid=44" if default_key == "path" else "mp0: /srv/models,mp=/mnt/models,ro=1"
            raise conf.error(line, f"{line.key}: cannot read {line.value!r} ({problem})",
                             hint=f"{line.key} is {default_key}[,key=value...], e.g. {example}")
        out[key] = val.strip()
    return out


def device(conf: LxcConf, line: Line) -> str:
    """The device node of a devN line."""
    path = property_string(conf, line, "path").get("path", "")
    if not path.startswith("/dev/"):
        raise conf.error(line, f"{line.key}: {path!r} is not a device path under /dev",
                         hint="devN is /dev/NODE[,gid=N,uid=N,mode=0NNN], e.g. dev0: /dev/nvidia0")
    return path


@dataclass(frozen=True)
class Mount:
    """A bind mount into the container: from mpN, or from an lxc.mount.entry line."""

    line: Line
    source: str  # host path, or a PVE volume such as local-lvm:vm-100-disk-1
    target: str  # absolute path in the container
    create_dir: bool = True


def mount_point(conf: LxcConf, line: Line) -> Mount:
    props = property_string(conf, line, "volume")
    if not props.get("volume") or not props.get("mp", "").startswith("/"):
        raise conf.error(line, f"{line.key}: no volume or no absolute mp= in {line.value!r}",
                         hint="mpN is VOLUME,mp=/path/in/ct[,ro=1], e.g. mp0: /srv/models,mp=/mnt/models,ro=1")
    return Mount(line, props["volume"], props["mp"])


def mount_entry(conf: LxcConf, line: Line) -> Mount:
    """lxc.mount.entry is an fstab line whose target is relative to the container's root."""
    fields = line.value.split()
    if len(fields) < 4:
        raise conf.error(line, f"lxc.mount.entry: {line.value!r} is not `SOURCE TARGET TYPE OPTIONS`",
                         hint="e.g. lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file")
    options = fields[3].split(",")
    return Mount(line, fields[0], "/" + fields[1].lstrip("/"), create_dir="create=file" not in options)


@dataclass(frozen=True)
class Allow:
    """One devices.allow rule: `a`, or `c MAJOR:MINOR rwm` with * for any."""

    line: Line
    everything: bool
    kind: str = ""
    major: int | None = None  # None: any
    minor: int | None = None

    @property
    def cgroup_v1(self) -> bool:
        return self.line.key.startswith("lxc.cgroup.")

    def covers(self, major: int, minor: int) -> bool:
        return self.everything or (self.kind == "c" and self.major in (None, major)
                                   and self.minor in (None, minor))


ALLOW_KEYS = ("lxc.cgroup2.devices.allow", "lxc.cgroup.devices.allow")


def allows(conf: LxcConf) -> list[Allow]:
    out: list[Allow] = []
    for line in conf.lines:
        if line.key not in ALLOW_KEYS:
            continue
        if line.value == "a":
            out.append(Allow(line, everything=True))
            continue
        m = _ALLOW.match(line.value)
        if not m:
            raise conf.error(line, f"{line.key}: cannot read {line.value!r}",
                             hint="a rule is `a` or `c MAJOR:MINOR rwm` (* for any), e.g. c 195:* rwm")
        major, minor = (None if v == "*" else int(v) for v in (m.group(2), m.group(3)))
        out.append(Allow(line, everything=False, kind=m.group(1), major=major, minor=minor))
    return out
