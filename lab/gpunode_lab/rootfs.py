"""The cached base rootfs of every lab container, and the local Debian package source.

The base is built once with LXC's debian template (debootstrap from the Debian mirror) and
kept under /var/cache/gpunode-lab/lxc/base; containers are overlay snapshots (or copies) of
it. While the host still has network, the dependency closure of the packages that roles
install (relative to the base) is downloaded; the lab serves it to the containers as a flat
apt repository through a read-only bind mount, and the base's own Debian sources are
replaced by that repository, so `apt-get update` in a container works without any route out.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from gpunode_lab import paths
from gpunode_lab.common import LabError, Progress, host_run, say, write_text

RELEASE = "bookworm"
# In the base: what the containers of a real node have before gpunode runs (python3 for
# gpunode's probes, systemd as PID 1). NOT python3-venv, NOT hello: roles install those.
BASE_PACKAGES = ("python3", "systemd", "systemd-sysv", "procps")
# In the local apt repository, with their dependency closure relative to the base. sudo: the plain
# SSH host made of a lab container (sshtarget.py) lets a non-root user in with it. openssh-server
# is in the base already (LXC's debian template installs it; MASKED_UNITS keeps it off). nftables:
# the fleet members' firewall (fleet_firewall, roles/servers/firewall.py) installs it.
REPO_PACKAGES = ("hello", "python3-venv", "python3-pip", "libnuma1", "ca-certificates", "curl", "jq", "sudo",
                 "nftables")
# Bump when the customisation below changes: the base (and the containers) are rebuilt.
BASE_REVISION = 3

LAB_SOURCE = "deb [trusted=yes] file:/mnt/lab/apt ./\n"
APT_CONF = (
    "// gpunode lab: containers install from the local repository at /mnt/lab/apt only,\n"
    "// which carries dependencies but not recommendations.\n"
    'APT::Install-Recommends "false";\n'
    'APT::Install-Suggests "false";\n'
)
# Units that make no sense without a network, or that would take apt's lock behind a test's back.
MASKED_UNITS = ("ssh.service", "ssh.socket", "apt-daily.timer", "apt-daily-upgrade.timer",
                "apt-daily.service", "apt-daily-upgrade.service", "man-db.timer", "e2scrub_all.timer",
                "fstrim.timer", "systemd-networkd-wait-online.service")

# The Debian mirror the base is built from and the lab repository's packages are fetched
# from. The lab writes this list itself: the template derives the security suite with
# debian-distro-info and, where that is missing, writes the pre-bullseye form
# (`bookworm/updates`), which has no Release file, so the package download failed on a
# fresh machine.
MIRROR = "http://deb.debian.org/debian"
SECURITY_MIRROR = "http://deb.debian.org/debian-security"
MIRROR_SOURCES = (
    f"deb {MIRROR} {RELEASE} main\n"
    f"deb {MIRROR} {RELEASE}-updates main\n"
    f"deb {SECURITY_MIRROR} {RELEASE}-security main\n"
)

BASE_STAMP = paths.CACHE / "base.stamp"
DEBS_STAMP = paths.CACHE / "debs.stamp"


def base_id() -> str:
    """Identity of the base build: containers made from another base are recreated."""
    spec = json.dumps([RELEASE, BASE_PACKAGES, BASE_REVISION])
    return hashlib.sha256(spec.encode()).hexdigest()[:16]


def _stamp(path: Path) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


def base_ready() -> bool:
    return _stamp(BASE_STAMP) == base_id() and (paths.BASE_ROOTFS / "usr" / "bin" / "python3").exists()


def ensure_base(progress: Progress | None = None) -> bool:
    """Build the base rootfs unless the cached one is current. True when it was (re)built."""
    if base_ready():
        say(progress, f"base rootfs: cached ({paths.BASE_ROOTFS})")
        return False
    started = time.monotonic()
    say(progress, f"base rootfs: building Debian {RELEASE} with lxc-create -t debian "
        "(debootstrap from the Debian mirror, about a minute)")
    base_dir = paths.CACHE_LXC_PATH / paths.BASE_NAME
    if base_dir.exists():
        shutil.rmtree(base_dir)
    BASE_STAMP.unlink(missing_ok=True)
    DEBS_STAMP.unlink(missing_ok=True)
    paths.CACHE_LXC_PATH.mkdir(parents=True, exist_ok=True)
    host_run(
        ["lxc-create", "-P", str(paths.CACHE_LXC_PATH), "-n", paths.BASE_NAME, "-t", "debian", "--",
         "-r", RELEASE, "--mirror=" + MIRROR, "--security-mirror=" + SECURITY_MIRROR],
        env={"LXC_CACHE_PATH": str(paths.TEMPLATE_CACHE), "DEBIAN_FRONTEND": "noninteractive"},
        what="building the base rootfs (lxc-create -t debian)",
        hint="the first build needs the Debian mirror (apt-get update must work on this host); "
        "then run `inv lab.up` again",
        timeout=1800,
    )
    # Not the template's --packages: it installs them with the sources it wrote, and when its
    # `apt-get update` fails it says so and still succeeds, leaving a base without python3.
    with _mirror_apt(paths.BASE_ROOTFS) as apt:
        host_run([*apt, "update"], env=APT_ENV, what="apt-get update (Debian mirror) for the base rootfs",
                 hint=MIRROR_HINT, timeout=600)
        host_run([*apt, "install", "-y", *BASE_PACKAGES], env=APT_ENV, what="installing "
                 + " ".join(BASE_PACKAGES) + " into the base rootfs", hint=MIRROR_HINT, timeout=1200)
        host_run([*apt, "clean"], env=APT_ENV, what="apt-get clean in the base rootfs")
    missing = [p for p in ("usr/bin/python3", "lib/systemd/systemd", "usr/bin/ps")
               if not (paths.BASE_ROOTFS / p).exists()]
    if missing:
        raise LabError("the base rootfs lacks " + ", ".join("/" + m for m in missing) + " after its build",
                       hint=MIRROR_HINT)
    _customise(paths.BASE_ROOTFS)
    write_text(BASE_STAMP, base_id() + "\n")
    say(progress, f"base rootfs: built in {time.monotonic() - started:.0f} s")
    return True


APT_ENV = {"DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"}
MIRROR_HINT = ("the lab's first build needs the Debian mirror; check `apt-get update` on this host, "
               "then run `inv lab.up` again")


@contextlib.contextmanager
def _mirror_apt(root: Path) -> Iterator[list[str]]:
    """apt-get in `root` (chroot) against the Debian mirror, with its own sources, lists and
    the host's resolv.conf, all removed afterwards: the base keeps no trace of the mirror."""
    lists = root / "var/lib/apt/gpunode-mirror-lists"
    mirror = root / "etc/apt/gpunode-mirror.list"
    resolv = root / "etc/resolv.conf"
    resolv_saved = resolv.with_name("resolv.conf.gpunode-saved")
    (lists / "partial").mkdir(parents=True, exist_ok=True)
    mirror.write_text(MIRROR_SOURCES)
    if resolv.exists() or resolv.is_symlink():
        os.replace(resolv, resolv_saved)
    shutil.copyfile("/etc/resolv.conf", resolv)
    try:
        yield ["chroot", str(root), "apt-get", "-q",
               "-o", "Dir::Etc::SourceList=/etc/apt/gpunode-mirror.list",
               "-o", "Dir::Etc::SourceParts=/nonexistent",
               "-o", "Dir::State::Lists=/var/lib/apt/gpunode-mirror-lists",
               "-o", "APT::Sandbox::User=root",
               "-o", "APT::Install-Recommends=false"]
    finally:
        shutil.rmtree(lists, ignore_errors=True)
        mirror.unlink(missing_ok=True)
        resolv.unlink(missing_ok=True)
        if resolv_saved.exists() or resolv_saved.is_symlink():
            os.replace(resolv_saved, resolv)
        for stale in ("var/cache/apt/pkgcache.bin", "var/cache/apt/srcpkgcache.bin"):
            (root / stale).unlink(missing_ok=True)


def _customise(root: Path) -> None:
    """Make the template's rootfs a lab container: offline apt, no network units, lean boot."""
    (root / "etc/apt/sources.list").unlink(missing_ok=True)
    parts = root / "etc/apt/sources.list.d"
    parts.mkdir(parents=True, exist_ok=True)
    for old in parts.iterdir():
        old.unlink()
    write_text(parts / "gpunode-lab.list", LAB_SOURCE)
    write_text(root / "etc/apt/apt.conf.d/99gpunode-lab", APT_CONF)
    _clear_lists(root)
    # Loopback only: the container's network is `lxc.net.0.type = empty`.
    write_text(root / "etc/network/interfaces",
               "# gpunode lab: no network in the container, loopback only\nauto lo\niface lo inet loopback\n")
    systemd = root / "etc/systemd/system"
    systemd.mkdir(parents=True, exist_ok=True)
    for unit in MASKED_UNITS:
        link = systemd / unit
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to("/dev/null")
    for wanted in systemd.glob("*.wants/ssh.service"):
        wanted.unlink()


def _clear_lists(root: Path) -> None:
    lists = root / "var/lib/apt/lists"
    if lists.exists():
        for entry in lists.iterdir():
            if entry.is_file() and entry.name != "lock":
                entry.unlink()


def debs_id() -> str:
    return hashlib.sha256(json.dumps([base_id(), REPO_PACKAGES]).encode()).hexdigest()[:16]


def debs_ready() -> bool:
    return _stamp(DEBS_STAMP) == debs_id() and any(paths.DEBS.glob("*.deb"))


def ensure_debs(progress: Progress | None = None) -> bool:
    """Download the repo packages' closure relative to the base into the cache. True when fetched."""
    if debs_ready():
        say(progress, f"apt packages: cached ({len(list(paths.DEBS.glob('*.deb')))} .deb in {paths.DEBS})")
        return False
    started = time.monotonic()
    say(progress, "apt packages: downloading " + ", ".join(REPO_PACKAGES)
        + " with their dependencies missing from the base")
    root = paths.BASE_ROOTFS
    inside_archives = "/var/cache/gpunode-debs"
    archives = root / inside_archives.lstrip("/")
    (archives / "partial").mkdir(parents=True, exist_ok=True)
    for old in archives.glob("*.deb"):
        old.unlink()
    try:
        with _mirror_apt(root) as apt:
            apt = [*apt, "-o", f"Dir::Cache::archives={inside_archives}"]
            host_run([*apt, "update"], env=APT_ENV, what="apt-get update (Debian mirror) for the lab repository",
                     hint=MIRROR_HINT, timeout=600)
            host_run([*apt, "install", "-y", "--download-only", *REPO_PACKAGES], env=APT_ENV,
                     what="downloading the lab repository's packages", hint=MIRROR_HINT, timeout=1200)
            # Named packages that the base already has are not downloaded above; fetch them too so
            # that the repository offers every named package.
            have = [p for p in REPO_PACKAGES if not any(archives.glob(f"{p}_*.deb"))]
            if have:
                host_run(["chroot", str(root), "sh", "-c", f'cd {inside_archives} && exec "$@"', "sh",
                          *apt[3:], "download", *have], env=APT_ENV, what="downloading " + " ".join(have),
                         hint=MIRROR_HINT, timeout=600)
        paths.DEBS.mkdir(parents=True, exist_ok=True)
        for old in paths.DEBS.glob("*.deb"):
            old.unlink()
        for deb in archives.glob("*.deb"):
            shutil.move(str(deb), paths.DEBS / deb.name)
    finally:
        shutil.rmtree(archives, ignore_errors=True)
    missing = [p for p in REPO_PACKAGES if not any(paths.DEBS.glob(f"{p}_*.deb"))]
    if missing:
        raise LabError("the lab repository lacks " + ", ".join(missing), hint=MIRROR_HINT)
    write_text(DEBS_STAMP, debs_id() + "\n")
    count = len(list(paths.DEBS.glob("*.deb")))
    say(progress, f"apt packages: {count} .deb fetched in {time.monotonic() - started:.0f} s")
    return True


def ensure_repo(progress: Progress | None = None) -> int:
    """Lay the cached .debs out as a flat repository in the apt share; return the package count."""
    repo = paths.SHARE_APT
    repo.mkdir(parents=True, exist_ok=True)
    want = {d.name: d for d in paths.DEBS.glob("*.deb")}
    have = {d.name for d in repo.glob("*.deb")}
    index = repo / "Packages"
    if want.keys() == have and index.exists() and (repo / "Release").exists():
        return len(want)
    for name in have - want.keys():
        (repo / name).unlink()
    for name in want.keys() - have:
        try:
            os.link(want[name], repo / name)
        except OSError:
            shutil.copy2(want[name], repo / name)
    write_text(index, _scan(repo))
    data = index.read_bytes()
    release = (
        "Origin: gpunode-lab\nLabel: gpunode-lab\nSuite: lab\nCodename: lab\n"
        f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S +0000', time.gmtime())}\n"
        "Architectures: amd64 all\nDescription: gpunode lab: what the lab's containers install from\n"
        f"MD5Sum:\n {hashlib.md5(data).hexdigest()} {len(data)} Packages\n"
        f"SHA256:\n {hashlib.sha256(data).hexdigest()} {len(data)} Packages\n"
    )
    write_text(repo / "Release", release)
    say(progress, f"apt repository: {len(want)} packages indexed in {repo}")
    return len(want)


def _scan(repo: Path) -> str:
    import subprocess

    try:
        proc = subprocess.run(["dpkg-scanpackages", "--multiversion", ".", "/dev/null"], cwd=repo,
                              capture_output=True, check=False)
    except FileNotFoundError:
        raise LabError("dpkg-scanpackages is not installed", hint="apt-get install dpkg-dev") from None
    if proc.returncode != 0:
        raise LabError("indexing the lab repository failed",
                       evidence=proc.stderr.decode("utf-8", "replace")[-2000:])
    return proc.stdout.decode()
