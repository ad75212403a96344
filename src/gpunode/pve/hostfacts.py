"""What a Proxmox host says about itself and its NVIDIA driver, in one SSH round trip.

`PROBE` (hostfacts.sh, run with `probe_args(root)`) prints `@section` blocks; `parse(text, root)` is pure and
turns them into HostFacts: the Proxmox VE version (pveversion), the running kernel, the NVIDIA
kernel module's version (/proc/driver/nvidia/version), how the driver was installed (NVIDIA's
.run leaves /usr/bin/nvidia-uninstall and /var/log/nvidia-installer.log; distribution packages
show in dpkg), the /dev/nvidia* nodes and the character-device majors of /proc/devices.

`root` is "" on a real host. The lab's stand-in host keeps its /dev/nvidia*, /proc/driver and
/usr/bin/pveversion under a folder of its own (inventory host var `host_root`, see
docs/lab.md): every path the probe reads is prefixed with it, and device paths in HostFacts
are the host's own (with the prefix), so devN entries name files that exist there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpunode import shell
from gpunode.facts.gpu import parse_proc_version
from gpunode.pve import devices

# dpkg-query patterns of the packages that carry a driver's version on Debian (non-free:
# nvidia-driver, nvidia-kernel-dkms, libcuda1, libnvidia-ml1, nvidia-smi) and on NVIDIA's CUDA repository
# for Debian (nvidia-driver, nvidia-kernel-open-dkms, cuda-drivers).
PACKAGE_PATTERNS = ("nvidia-driver*", "nvidia-kernel-*", "libcuda1", "libnvidia-ml1", "nvidia-smi", "cuda-drivers")
RUN_MARKERS = ("/usr/bin/nvidia-uninstall", "/var/log/nvidia-installer.log")
INSTALLER_CACHE = "/var/cache/gpunode/nvidia"  # where onboard keeps the fetched .run, once per node

# The version threshold this project uses for devN passthrough (issue 10: "devN on Proxmox
# >= 8.2"); older hosts get the classic lxc.cgroup2/lxc.mount.entry lines.
DEVN_SINCE = (8, 2)


PROBE = shell.script("gpunode.pve", "hostfacts.sh")


def probe_args(root: str = "") -> list[str]:
    """hostfacts.sh's arguments ($1.. there): root, the installers' cache, the .run's markers, the patterns."""
    return [root, INSTALLER_CACHE, " ".join(RUN_MARKERS), *PACKAGE_PATTERNS]


@dataclass(frozen=True)
class Package:
    name: str
    version: str        # dpkg's, e.g. 535.183.01-1~deb12u1

    @property
    def upstream(self) -> str:
        """535.183.01 from 535.183.01-1~deb12u1 (and from 1:535.183.01-1)."""
        v = self.version.split(":", 1)[-1]
        return v.rsplit("-", 1)[0] if "-" in v else v


@dataclass(frozen=True)
class HostFacts:
    root: str = ""
    pveversion: str | None = None          # the line pveversion printed
    pve: tuple[int, int, int] | None = None
    kernel: str = ""
    driver: str | None = None              # kernel module version, e.g. 580.65.06
    driver_text: str = ""                  # the whole /proc/driver/nvidia/version
    run_markers: tuple[str, ...] = ()
    packages: tuple[Package, ...] = ()
    majors: dict[str, int] = field(default_factory=dict)   # /proc/devices "Character devices"
    nodes: tuple[str, ...] = ()            # /dev/nvidia* as the host names them (root stripped)
    installers: tuple[str, ...] = ()       # .run files already fetched onto the host

    @property
    def install(self) -> str:
        """"run", "packages" or "unknown": how the host's driver was installed."""
        if "/usr/bin/nvidia-uninstall" in self.run_markers:
            return "run"
        if self.driver_packages:
            return "packages"
        return "run" if self.run_markers else "unknown"

    @property
    def driver_packages(self) -> tuple[Package, ...]:
        """Installed packages whose upstream version is the kernel module's."""
        return tuple(p for p in self.packages if self.driver and p.upstream == self.driver)

    @property
    def uvm(self) -> bool:
        return "/dev/nvidia-uvm" in self.nodes

    @property
    def devn(self) -> bool:
        """devN passthrough (else the classic lxc.* lines); unknown version counts as new."""
        return self.pve is None or self.pve[:2] >= DEVN_SINCE

    def host_path(self, path: str) -> str:
        return self.root + path

    def lines(self) -> list[str]:
        """The facts as `inv onboard --check` shows them."""
        gpus = sorted(i for i in (devices.gpu_index(p) for p in self.nodes) if i is not None)
        pve = ".".join(map(str, self.pve)) if self.pve else "not found (no pveversion)"
        how = {"run": "NVIDIA .run installer (" + ", ".join(self.run_markers) + ")",
               "packages": "packages " + ", ".join(f"{p.name} {p.version}" for p in self.driver_packages),
               "unknown": "unknown (no .run markers, no packages of that version)"}[self.install]
        out = [f"host: Proxmox VE {pve}; kernel {self.kernel or '?'}",
               f"host: NVIDIA driver {self.driver or 'absent (no /proc/driver/nvidia/version)'}"
               + (f", installed by {how}" if self.driver else ""),
               f"host: passthrough by {'devN entries' if self.devn else 'classic lxc.cgroup2 + lxc.mount.entry lines'}"
               f" (Proxmox VE {'>=' if self.devn else '<'} {DEVN_SINCE[0]}.{DEVN_SINCE[1]})",
               f"host: /dev/nvidia*: GPUs {gpus or 'none'}; " + ", ".join(
                   f"{n} {'yes' if n in self.nodes else 'MISSING'}" for n in ("/dev/nvidiactl", "/dev/nvidia-uvm"))]
        if self.driver and not self.uvm:
            out += [f"host: {line}" for line in uvm_advice()]
        return out


def uvm_advice() -> list[str]:
    """How to make /dev/nvidia-uvm exist: it appears only after the first CUDA use on the host."""
    return ["/dev/nvidia-uvm appears only after the first CUDA use on the host; create it now with",
            "  nvidia-modprobe -u -c=0",
            "and at every boot with a udev rule, e.g. /etc/udev/rules.d/70-nvidia-uvm.rules:",
            '  KERNEL=="nvidia_uvm", RUN+="/usr/bin/nvidia-modprobe -c0 -u"',
            "plus nvidia-uvm in /etc/modules-load.d/nvidia-uvm.conf so the module loads at boot"]


def sections(text: str) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if re.fullmatch(r"@[a-z_]+", line):
            current = line[1:]
            out[current] = []
        elif current is not None:
            out[current].append(line)
    return {k: "\n".join(v).strip("\n") for k, v in out.items()}


_PVE = re.compile(r"pve-manager/(\d+)\.(\d+)[.-](\d+)")


def parse_pveversion(text: str) -> tuple[int, int, int] | None:
    """(8, 2, 4) from 'pve-manager/8.2.4/faa8... (running kernel: 6.8.8-2-pve)'; 7.x wrote 7.4-3."""
    m = _PVE.search(text)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def parse_proc_devices(text: str) -> dict[str, int]:
    """{name: major} of the 'Character devices:' part of /proc/devices (first major per name)."""
    out: dict[str, int] = {}
    in_chars = False
    for line in text.splitlines():
        if line.strip().endswith(":"):
            in_chars = line.strip() == "Character devices:"
            continue
        parts = line.split()
        if in_chars and len(parts) == 2 and parts[0].isdigit():
            out.setdefault(parts[1], int(parts[0]))
    return out


def parse_packages(text: str) -> tuple[Package, ...]:
    """Installed packages ("ii  name[:arch]  version  arch  description") of `dpkg -l`."""
    found = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "ii":
            found.append(Package(parts[1].split(":", 1)[0], parts[2]))
    return tuple(found)


def parse(text: str, root: str = "") -> HostFacts:
    s = sections(text)
    pv = s.get("pveversion", "").strip()
    listing = s.get("ls", "")
    if root:
        listing = listing.replace(root + "/dev/", "/dev/")
    driver_text = s.get("driver", "")
    return HostFacts(
        root=root,
        pveversion=pv.splitlines()[0] if pv else None,
        pve=parse_pveversion(pv),
        kernel=s.get("kernel", "").strip(),
        driver=parse_proc_version(driver_text) if driver_text else None,
        driver_text=driver_text,
        run_markers=tuple(m for m in s.get("run_markers", "").split() if m),
        packages=parse_packages(s.get("packages", "")),
        majors=parse_proc_devices(s.get("proc_devices", "")),
        nodes=tuple(devices.parse_ls(listing)),
        installers=tuple(n for n in s.get("installers", "").split() if n.endswith(".run")),
    )
