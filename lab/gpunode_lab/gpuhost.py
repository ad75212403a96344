"""STAND-IN for an NVIDIA driver on the lab's Proxmox host (there is no GPU here). NOT NVIDIA's.

It follows what a Proxmox host with NVIDIA's .run driver shows to gpunode, under one folder
of the lab (ROOT, the inventory host var `host_root`):

    ROOT/dev/nvidia0..N, nvidiactl, nvidia-modeset, nvidia-uvm, nvidia-uvm-tools
                                  real character devices (mknod: major 195, nvidia-uvm on a
                                  "dynamic" major), bind-mounted into GPU containers by the
                                  PVE API stand-in in place of devN passthrough
    ROOT/proc/driver/nvidia/version   the kernel module's version, as /proc/driver/nvidia/version
                                  reads (bind-mounted at /proc/driver in GPU containers, which is
                                  how a real container sees the host's module)
    ROOT/proc/devices             the character majors of those nodes
    ROOT/usr/bin/pveversion       `pve-manager/8.2.4/gpunode-lab (running kernel: <uname -r>)`
    ROOT/usr/bin/nvidia-uninstall, ROOT/var/log/nvidia-installer.log
                                  what NVIDIA's .run leaves behind (so the host "used the .run")
    DOWNLOADS/NVIDIA-Linux-x86_64-<v>.run
                                  a stand-in installer (shell script) at a file:// URL standing in
                                  for download.nvidia.com: with --silent --no-kernel-module it
                                  installs libcuda.so.<v>/libnvidia-ml.so.<v> placeholders and the
                                  replaying nvidia-smi (gpunode_lab/nvidia_smi_standin.py) with
                                  that version string; without --no-kernel-module it fails, as
                                  building a module inside a container does

`set_driver(version)` is a host driver upgrade: the module version changes, containers
keep their old user-space until onboard installs the new one.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpunode_lab import paths
from gpunode_lab.common import write_text

ROOT = paths.STATE / "gpuhost"
DOWNLOADS = ROOT / "downloads"     # the stand-in for https://us.download.nvidia.com/...
INSTALLER_URL = f"file://{DOWNLOADS}/NVIDIA-Linux-x86_64-{{version}}.run"
DEFAULT_VERSION = "590.48.01"      # the driver of the default recording (rtx-pro-6000-x8)
MAIN_MAJOR = 195
UVM_MAJOR = 509                    # nvidia-uvm's major is dynamic; this one is the lab's
PVE_VERSION = "8.2.4"
LIB = "/usr/lib/x86_64-linux-gnu"
APT = ROOT / "apt"                 # stand-in for the distribution repository a packaged driver came from
CT_APT = "/mnt/lab/nvidia-apt"     # where GPU containers see it (deb [trusted=yes] file:/mnt/lab/nvidia-apt ./)
HOST_PACKAGES = ("nvidia-driver", "nvidia-kernel-dkms", "libcuda1", "libnvidia-ml1", "nvidia-smi")


def proc_version(version: str) -> str:
    # The line format of /proc/driver/nvidia/version (tests/data/snapshots/h200/driver_proc.txt).
    return (f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release Build  "
            "(gpunode-lab stand-in)  \nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14) \n")


def _node(path: Path, major: int, minor: int) -> None:
    want = os.makedev(major, minor)
    try:
        st = path.lstat()
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == want:
            return
        path.unlink()
    except FileNotFoundError:
        pass
    os.mknod(path, stat.S_IFCHR | 0o666, want)
    os.chmod(path, 0o666)


def installer_text(version: str) -> str:
    """The stand-in NVIDIA-Linux-x86_64-<version>.run: a shell script with nvidia-smi inside."""
    smi = (Path(__file__).with_name("nvidia_smi_standin.py").read_text()
           .replace("INSTALLED_VERSION = None", f'INSTALLED_VERSION = "{version}"', 1))
    return f"""#!/bin/sh
# STAND-IN for NVIDIA's NVIDIA-Linux-x86_64-{version}.run, made by the gpunode lab
# (gpunode_lab.gpuhost). NOT NVIDIA's: it installs placeholders and a replaying nvidia-smi.
VERSION={version}
silent=0; no_kernel_module=0
for a in "$@"; do
  case "$a" in
    -s|--silent) silent=1 ;;
    --no-kernel-module|--no-kernel-modules) no_kernel_module=1 ;;
    -v|--version) echo "nvidia-installer stand-in: version $VERSION"; exit 0 ;;
    --no-questions|--accept-license|--ui=none|--no-x-check|--no-nouveau-check|--no-drm) ;;
    *) echo "ERROR: Unrecognized option: '$a'" >&2; exit 1 ;;
  esac
done
if [ "$no_kernel_module" != 1 ]; then
  echo "ERROR: Unable to load the kernel module 'nvidia.ko' (gpunode lab stand-in: a container cannot" \\
       "build or load kernel modules; pass --no-kernel-module)" >&2
  exit 1
fi
set -e
lib={LIB}
mkdir -p "$lib"
# Like nvidia-installer, an earlier installation of another version goes first.
rm -f "$lib"/libcuda.so.[0-9]*.* "$lib"/libnvidia-ml.so.[0-9]*.*
for l in libcuda libnvidia-ml; do
  echo "gpunode lab stand-in for $l $VERSION (not a library)" > "$lib/$l.so.$VERSION"
  ln -sf "$l.so.$VERSION" "$lib/$l.so.1"
  ln -sf "$l.so.1" "$lib/$l.so"
done
t=$(mktemp /usr/bin/.nvidia-smi.XXXXXX)
cat > "$t" <<'GPUNODE_NVIDIA_SMI'
{smi.rstrip()}
GPUNODE_NVIDIA_SMI
chmod 755 "$t"; mv -f "$t" /usr/bin/nvidia-smi
printf '#!/bin/sh\\necho "nvidia-uninstall stand-in ($VERSION)"\\n' > /usr/bin/nvidia-uninstall
chmod 755 /usr/bin/nvidia-uninstall
echo "nvidia-installer log file '/var/log/nvidia-installer.log' (gpunode lab stand-in)" > /var/log/nvidia-installer.log
echo "installer version: $VERSION; options: $*" >> /var/log/nvidia-installer.log
[ "$silent" = 1 ] || echo "Installation of the NVIDIA driver (version: $VERSION) is now complete."
"""


def set_driver(version: str) -> None:
    """The host's module version (a driver upgrade) and the installer of that version."""
    write_text(ROOT / "proc" / "driver" / "nvidia" / "version", proc_version(version))
    write_text(DOWNLOADS / f"NVIDIA-Linux-x86_64-{version}.run", installer_text(version), 0o755)
    if install_kind() == "packages":
        _packages(version)


def install_kind() -> str:
    return "packages" if (ROOT / "var" / "lib" / "dpkg" / "status").exists() else "run"


def set_install(kind: str) -> None:
    """How the host "installed" its driver: NVIDIA's .run (its markers) or packages (a dpkg
    status listing them at the module's version, and a repository holding their user-space)."""
    markers = (ROOT / "usr" / "bin" / "nvidia-uninstall", ROOT / "var" / "log" / "nvidia-installer.log")
    status = ROOT / "var" / "lib" / "dpkg" / "status"
    if kind == "run":
        status.unlink(missing_ok=True)
        write_text(markers[0], "#!/bin/sh\necho 'nvidia-uninstall stand-in'\n", 0o755)
        write_text(markers[1], "nvidia-installer log file (gpunode lab stand-in)\n")
        return
    for m in markers:
        m.unlink(missing_ok=True)
    _packages(driver() or DEFAULT_VERSION)


def _packages(version: str) -> None:
    import subprocess
    import tempfile

    deb_version = f"{version}-1"
    write_text(ROOT / "var" / "lib" / "dpkg" / "status", "".join(
        f"Package: {p}\nStatus: install ok installed\nMaintainer: gpunode lab <lab@localhost>\n"
        f"Architecture: amd64\nVersion: {deb_version}\nDescription: gpunode lab stand-in\n\n" for p in HOST_PACKAGES))
    APT.mkdir(parents=True, exist_ok=True)
    smi = (Path(__file__).with_name("nvidia_smi_standin.py").read_text()
           .replace("INSTALLED_VERSION = None", f'INSTALLED_VERSION = "{version}"', 1))
    for pkg, lib in (("libcuda1", "libcuda"), ("libnvidia-ml1", "libnvidia-ml"), ("nvidia-smi", None)):
        deb = APT / f"{pkg}_{deb_version}_amd64.deb"
        if deb.exists():
            continue
        with tempfile.TemporaryDirectory() as tmp:
            top = Path(tmp)
            (top / "DEBIAN").mkdir()
            (top / "DEBIAN" / "control").write_text(
                f"Package: {pkg}\nVersion: {deb_version}\nArchitecture: amd64\n"
                f"Maintainer: gpunode lab <lab@localhost>\nDescription: gpunode lab stand-in of {pkg}\n")
            if lib:
                d = top / LIB.lstrip("/")
                d.mkdir(parents=True)
                (d / f"{lib}.so.{version}").write_text(f"gpunode lab stand-in for {lib} {version}\n")
                (d / f"{lib}.so.1").symlink_to(f"{lib}.so.{version}")
            else:
                (top / "usr" / "bin").mkdir(parents=True)
                (top / "usr" / "bin" / "nvidia-smi").write_text(smi)
                (top / "usr" / "bin" / "nvidia-smi").chmod(0o755)
            subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(top), str(deb)],
                           check=True, capture_output=True)
    index = subprocess.run(["dpkg-scanpackages", "--multiversion", "."], cwd=APT, check=True,
                           capture_output=True, text=True).stdout
    write_text(APT / "Packages", index)


def set_pve(version: str) -> None:
    """The Proxmox VE version pveversion reports (before 8.2 onboard uses the classic lines)."""
    write_text(ROOT / "usr" / "bin" / "pveversion",
               "#!/bin/sh\n# STAND-IN for Proxmox VE's pveversion (gpunode lab)\n"
               f'echo "pve-manager/{version}/gpunode-lab (running kernel: $(uname -r))"\n', 0o755)


def driver() -> str | None:
    from gpunode.facts.gpu import parse_proc_version

    try:
        return parse_proc_version((ROOT / "proc" / "driver" / "nvidia" / "version").read_text())
    except FileNotFoundError:
        return None


def ensure(gpus: int = 8, version: str | None = None) -> Path:
    """Make (or refresh) the stand-in host; keeps a driver version already set unless given one."""
    dev = ROOT / "dev"
    dev.mkdir(parents=True, exist_ok=True)
    for i in range(gpus):
        _node(dev / f"nvidia{i}", MAIN_MAJOR, i)
    _node(dev / "nvidiactl", MAIN_MAJOR, 255)
    _node(dev / "nvidia-modeset", MAIN_MAJOR, 254)
    _node(dev / "nvidia-uvm", UVM_MAJOR, 0)
    _node(dev / "nvidia-uvm-tools", UVM_MAJOR, 1)
    write_text(ROOT / "proc" / "devices",
               f"Character devices:\n  1 mem\n{MAIN_MAJOR} nvidia\n{MAIN_MAJOR} nvidiactl\n{UVM_MAJOR} nvidia-uvm\n"
               "\nBlock devices:\n  7 loop\n")
    set_pve(PVE_VERSION)
    APT.mkdir(parents=True, exist_ok=True)
    if install_kind() == "run":
        set_install("run")
    set_driver(version or driver() or DEFAULT_VERSION)
    return ROOT


def ct_mounts(dev_paths: list[str]) -> list[tuple[Path, str, str]]:
    """(host path, path in the CT, "file"|"dir") binds standing in for devN passthrough of these
    stand-in nodes, plus the module's /proc/driver and the recording the nvidia-smi replays."""
    prefix = str(ROOT / "dev") + "/"
    out = [(Path(p), "/dev/" + p[len(prefix):], "file") for p in dev_paths if p.startswith(prefix)]
    if out:
        out += [(ROOT / "proc" / "driver", "/proc/driver", "dir"), (paths.SHARE_NVIDIA_SMI, paths.CT_NVIDIA_SMI, "dir"),
                (APT, CT_APT, "dir")]
    return out
