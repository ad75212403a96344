"""Checks of a container config made by hand, for GPU inference (issue 10): each finding says
what is wrong, on which line, what it risks and how to fix it. Pure: a parsed LxcConf in,
findings out. The JSON layout ("gpunode.audit/1") and the list of checks are in docs/audit.md.

Majors: NVIDIA's 195 (nvidiaN, nvidiactl 195:255, nvidia-modeset 195:254) is fixed; the
kernel hands out dynamic character majors from 234-254 and then 384-511
(Documentation/admin-guide/devices.txt), which is where nvidia-uvm and nvidia-caps land, and
the number can change with the next boot or driver. A hard-coded one of those is the finding.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

from gpunode.pve import lxcconf
from gpunode.pve.lxcconf import Line, LxcConf

SCHEMA = "gpunode.audit/1"
SEVERITIES = ("high", "warning", "info")
NVIDIA_MAJOR = 195
# 195:N for /dev/nvidiaN; the two others of the fixed major.
FIXED_MINORS = {"/dev/nvidiactl": 255, "/dev/nvidia-modeset": 254}
# Host folders that hold the driver's user-space (and the C library it is built against).
LIBRARY_DIRS = ("/lib", "/lib32", "/lib64", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/local/lib",
                "/usr/local/cuda", "/usr/local/nvidia", "/opt/nvidia")
DEVN_FIX = ("use devN entries, which read the node's major:minor when the container starts: "
            "`pct set N -dev0 /dev/nvidia0 -dev1 /dev/nvidiactl -dev2 /dev/nvidia-uvm` (Proxmox VE 8.2+), "
            "or `inv onboard --host H --ct N --gpus 0,...`")


def dynamic_major(major: int) -> bool:
    return 234 <= major <= 254 or 384 <= major <= 511


@dataclass(frozen=True)
class Finding:
    id: str
    severity: str
    line: int | None  # None: the finding is about something absent
    message: str
    risk: str
    fix: str
    text: str | None = None  # the config line as written

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Options:
    """What the config alone does not say: the model's size and where the target sees it."""

    model_bytes: int | None = None
    servers: int = 1
    server_reserve_bytes: int = 2684354560  # the weights role's weights_server_reserve_bytes
    model_source: str | None = None


@dataclass
class Report:
    source: str
    complete: bool
    snapshots: list[str]
    nvidia_nodes: list[str]
    memory_mib: int | None
    findings: list[Finding] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    @property
    def failing(self) -> bool:
        return any(f.severity != "info" for f in self.findings)

    def as_dict(self) -> dict:
        return {"source": self.source, "complete": self.complete, "snapshots": self.snapshots,
                "nvidia_nodes": self.nvidia_nodes, "memory_mib": self.memory_mib,
                "findings": [f.as_dict() for f in self.findings], "skipped": self.skipped}


class Facts:
    """What the checks share, parsed once (each parse error names its line)."""

    def __init__(self, conf: LxcConf, options: Options):
        self.conf = conf
        self.options = options
        self.allows = lxcconf.allows(conf)
        self.devn = [(line, lxcconf.device(conf, line)) for line in conf.indexed("dev")]
        self.entries = [lxcconf.mount_entry(conf, line) for line in conf.raw("lxc.mount.entry")]
        self.mps = [lxcconf.mount_point(conf, line) for line in conf.indexed("mp")]
        # A node counts by its path in the container: frigate-8652 binds mknod copies kept elsewhere.
        classic = {m.target: m.line for m in self.entries if m.target.startswith("/dev/nvidia")}
        self.nodes: dict[str, Line] = {**classic, **{path: line for line, path in self.devn
                                                     if path.startswith("/dev/nvidia")}}
        self.classic_nodes = classic
        self.gpus = sorted(p for p in self.nodes if p[len("/dev/nvidia"):].isdigit())

    def skip(self, report: Report, check: str, why: str) -> None:
        report.skipped.append({"check": check, "why": why})


Check = Callable[[Facts, Report], Iterable[Finding]]


def _finding(id: str, severity: str, line: Line | None, message: str, risk: str, fix: str) -> Finding:
    return Finding(id, severity, line.number if line else None, message, risk, fix, line.text if line else None)


def check_privileged(f: Facts, report: Report) -> Iterable[Finding]:
    if not f.conf.complete:
        f.skip(report, "privileged", "a fragment (no rootfs line): whether the container is unprivileged is not in it")
        return
    line = f.conf.get("unprivileged")
    # PVE's boolean type (check_type) reads 1/yes/on/true as true, 0/no/off/false as false.
    if line is None or line.value.lower() not in ("1", "yes", "on", "true"):
        yield _finding(
            "privileged", "high", line,
            "the container is privileged (" + ("no `unprivileged: 1`" if line is None else f"`{line.text}`") + ")",
            "root in the container is root on the host: the inference servers run downloaded code (pip wheels, "
            "model repositories with custom code), and an escape owns the node",
            "make it unprivileged: back it up and restore with `pct restore N BACKUP --unprivileged 1` (files are "
            "shifted by 100000), or create a new one with `inv onboard`; pass GPUs with devN entries")


def check_allow_all(f: Facts, report: Report) -> Iterable[Finding]:
    for rule in f.allows:
        if rule.everything:
            yield _finding(
                "devices-allow-all", "high", rule.line, "the device cgroup allows every device (`a`)",
                "the container can open any block or character device the host has, disks and /dev/mem "
                "included, when a node for it exists or can be made",
                "delete the line; allow only the GPU nodes, best with devN entries (" + DEVN_FIX + ")")


def check_apparmor(f: Facts, report: Report) -> Iterable[Finding]:
    line = f.conf.get("lxc.apparmor.profile")
    if line is not None and line.value == "unconfined":
        yield _finding(
            "apparmor-unconfined", "high", line, "AppArmor is off for the container",
            "the profile is what stops a container from writing /proc/sys, /sys and mounting what it likes; "
            "CUDA does not need it off",
            "delete the line (PVE's generated profile applies again); with nesting or Docker inside, use "
            "`features: nesting=1` instead")


def check_cap_drop(f: Facts, report: Report) -> Iterable[Finding]:
    for line in f.conf.raw("lxc.cap.drop"):
        if not line.value:
            yield _finding(
                "cap-drop-empty", "high", line, "`lxc.cap.drop:` with no value empties PVE's list of dropped "
                "capabilities",
                "the container keeps CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_SYS_TIME, CAP_MAC_ADMIN...: in a "
                "privileged container that is loading kernel modules on the host",
                "delete the line; the NVIDIA driver is loaded on the host, the container needs none of these")


def check_dynamic_major(f: Facts, report: Report) -> Iterable[Finding]:
    for rule in f.allows:
        if rule.major is not None and dynamic_major(rule.major):
            yield _finding(
                "dynamic-major", "warning", rule.line,
                f"major {rule.major} is hard-coded; the kernel assigns it at module load (nvidia-uvm, nvidia-caps)",
                "after a reboot or a driver update nvidia-uvm can get another number: CUDA then fails in the "
                "container (cuInit error 999, 'no CUDA-capable device') while nvidia-smi still works, and the "
                "line allows whatever device got this number",
                DEVN_FIX + "; on older Proxmox read the major on the host (`grep nvidia /proc/devices`) each "
                "time the driver changes")


def check_cgroup_v1(f: Facts, report: Report) -> Iterable[Finding]:
    for line in f.conf.lines:
        if line.key.startswith("lxc.cgroup."):
            yield _finding(
                "cgroup-v1-key", "warning", line, f"`{line.key}` is a cgroup v1 key",
                "Proxmox VE 7.0 and later run cgroup v2 only: the line does nothing there, so the devices it "
                "names stay denied",
                f"write it as `{line.key.replace('lxc.cgroup.', 'lxc.cgroup2.', 1)}`, or replace the device "
                "lines by devN entries")


def check_not_allowed(f: Facts, report: Report) -> Iterable[Finding]:
    """Classic passthrough needs an allow rule per node; devN makes its own."""
    devn_paths = {path for _line, path in f.devn}
    working = [r for r in f.allows if not r.cgroup_v1]
    for path, line in sorted(f.classic_nodes.items(), key=lambda kv: kv[1].number):
        if path in devn_paths:
            continue
        minor = FIXED_MINORS.get(path)
        if minor is None and path[len("/dev/nvidia"):].isdigit():
            minor = int(path[len("/dev/nvidia"):])
        if minor is None or any(r.covers(NVIDIA_MAJOR, minor) for r in working):
            continue
        yield _finding(
            "device-not-allowed", "high", line, f"{path} ({NVIDIA_MAJOR}:{minor}) is bound in but no "
            "lxc.cgroup2.devices.allow rule allows it",
            "opening it fails with 'Operation not permitted': nvidia-smi and CUDA see no GPU",
            f"add `lxc.cgroup2.devices.allow: c {NVIDIA_MAJOR}:* rwm`, or better " + DEVN_FIX)


def check_missing_nodes(f: Facts, report: Report) -> Iterable[Finding]:
    if not f.gpus:
        for check in ("missing-nvidiactl", "missing-nvidia-uvm"):
            f.skip(report, check, "no /dev/nvidiaN node is passed through")
        return
    first = f.nodes[f.gpus[0]]
    for path, id, what in (("/dev/nvidiactl", "missing-nvidiactl", "the driver's control node: every CUDA and NVML "
                            "call opens it first"),
                           ("/dev/nvidia-uvm", "missing-nvidia-uvm", "CUDA's unified memory node: cuInit fails "
                            "without it, though nvidia-smi works")):
        if path not in f.nodes:
            yield _finding(
                id, "high", None, f"{', '.join(f.gpus)} passed through (line {first.number}) but not {path}",
                f"{path} is {what}",
                f"pass it too (`pct set N -devK {path}`, or `inv onboard --gpus ...` which adds it)"
                + ("; /dev/nvidia-uvm appears on the host only after first use: `nvidia-modprobe -u -c=0` "
                   "at boot" if path.endswith("uvm") else ""))


def _under(path: str, folder: str) -> bool:
    path = posixpath.normpath(path)
    return path == folder or path.startswith(folder + "/")


def check_host_libraries(f: Facts, report: Report) -> Iterable[Finding]:
    for m in [*f.entries, *f.mps]:
        source = m.source
        if not source.startswith("/"):
            continue  # a PVE volume, not a host folder
        driver_binary = _under(source, "/usr/bin") and posixpath.basename(source).startswith("nvidia")
        if driver_binary or any(_under(source, d) for d in LIBRARY_DIRS):
            yield _finding(
                "host-library-mount", "warning", m.line, f"host driver files {source} are bound into the "
                "container",
                "the container's user-space then follows the host's files: a host driver update swaps them "
                "under running servers, a partial set gives 'Driver/library version mismatch', libraries "
                "built for the host's glibc may not load in another distribution, and ldconfig in the "
                "container does not know them",
                "delete the line and install the driver's user-space in the container at the host's version "
                "(the same NVIDIA .run with --no-kernel-module, or the distribution's packages of that version)")


def check_mixed(f: Facts, report: Report) -> Iterable[Finding]:
    if not f.devn:
        return
    classic = [r.line for r in f.allows] + [m.line for m in f.entries if m.target.startswith("/dev/")]
    if classic:
        first = min(classic, key=lambda line: line.number)
        yield _finding(
            "mixed-passthrough", "warning", first, f"devN entries (line {f.devn[0][0].number}) and "
            f"{len(classic)} classic lxc.cgroup*/lxc.mount.entry device lines in one config",
            "two mechanisms for the same nodes: a stale classic line (a hard-coded major, a bind of a node "
            "that moved) keeps working or failing on its own, and tools that manage devN (inv onboard) "
            "leave it in place",
            "delete the classic device lines once a devN entry covers each node")


def check_model_mount(f: Facts, report: Report) -> Iterable[Finding]:
    if not f.conf.complete:
        f.skip(report, "no-model-mount", "a fragment (no rootfs line): its mount points are not in it")
        return
    if not f.gpus:
        f.skip(report, "no-model-mount", "no GPU passed through: a model store is looked for in GPU containers only")
        return
    folders = [m for m in [*f.mps, *f.entries] if not m.target.startswith("/dev/") and m.create_dir
               and not any(_under(m.source, d) for d in LIBRARY_DIRS)]
    wanted = f.options.model_source
    if wanted:
        if any(_under(wanted, m.target) for m in folders):
            return
        message = f"no mount point holds the model source {wanted}"
    elif folders:
        return
    else:
        message = "no mount point: no host folder or volume for the model store"
    yield _finding(
        "no-model-mount", "warning", None, message,
        "the weights then live in the root disk: each container downloads and keeps its own copy, the rootfs "
        "fills up, and the copy goes with the container when it is re-created",
        "bind the host's model store read-only: `pct set N -mp0 /srv/models,mp=/mnt/models,ro=1` (or "
        "`inv onboard --mount /srv/models:/mnt/models`) and point model_source at it")


def memory_mib(conf: LxcConf) -> int | None:
    line = conf.get("memory")
    if line is None:
        return 512 if conf.complete else None  # PVE's default for a container without the key
    if not line.value.isdigit():
        raise conf.error(line, f"memory: {line.value!r} is not a whole number of MiB", hint="e.g. memory: 65536")
    return int(line.value)


def check_memory(f: Facts, report: Report) -> Iterable[Finding]:
    opts = f.options
    if opts.model_bytes is None:
        f.skip(report, "memory-too-small", "the model's size is not known: pass --model-size-gib or --model-dir")
        return
    mib = memory_mib(f.conf)
    if mib is None:
        f.skip(report, "memory-too-small", "a fragment (no rootfs line): its memory is not in it")
        return
    need = opts.model_bytes + opts.servers * opts.server_reserve_bytes
    if mib * (1 << 20) < need:
        gib = 1 << 30
        line = f.conf.get("memory")
        yield _finding(
            "memory-too-small", "high", line,
            f"memory {mib} MiB < staged weights {opts.model_bytes / gib:.1f} GiB + {opts.servers} server(s) x "
            f"{opts.server_reserve_bytes / gib:.1f} GiB = {need / gib:.1f} GiB",
            "weights are staged in /dev/shm, which counts against the container's memory limit: the staging "
            "step refuses, or the servers are OOM-killed while loading",
            f"`pct set N -memory {-(-need // (1 << 20))}` (MiB) or more, or set weights_stage: false to load "
            "from disk")


CHECKS: tuple[Check, ...] = (
    check_privileged, check_allow_all, check_apparmor, check_cap_drop, check_dynamic_major, check_cgroup_v1,
    check_not_allowed, check_missing_nodes, check_host_libraries, check_mixed, check_model_mount, check_memory)


def audit(conf: LxcConf, options: Options | None = None) -> Report:
    qemu = conf.qemu_keys
    if qemu:
        shown = ", ".join(qemu[:4]) + (", ..." if len(qemu) > 4 else "")
        raise lxcconf.LxcConfError(
            f"{conf.source}: a QEMU virtual machine config ({shown}), not a container config: the container "
            "audit does not apply to it",
            hint="give a container config (/etc/pve/lxc/N.conf or `pct config N`); a VM with its GPU passed "
                 "through (hostpciN) is provisioned as a plain SSH host, with no container to audit")
    facts = Facts(conf, options or Options())
    report = Report(source=conf.source, complete=conf.complete, snapshots=list(conf.snapshots),
                    nvidia_nodes=sorted(facts.nodes), memory_mib=memory_mib(conf))
    for check in CHECKS:
        report.findings.extend(check(facts, report))
    report.findings.sort(key=lambda x: (x.line is None, x.line or 0, SEVERITIES.index(x.severity)))
    return report


def document(reports: list[Report]) -> dict:
    findings = [f for r in reports for f in r.findings]
    return {"schema": SCHEMA, "configs": [r.as_dict() for r in reports],
            "summary": {"configs": len(reports), "findings": len(findings),
                        **{s: sum(f.severity == s for f in findings) for s in SEVERITIES}}}
