"""up / down / destroy / status of the lab node ("lab"): sshd + LXC containers + pct stand-in.

Idempotent: up() on a running lab changes nothing and takes well under a second; up() after
down() starts what is there (seconds); only the first up() on a machine builds the base rootfs
and downloads packages (about two minutes), which the cache keeps across destroy().
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gpunode_lab import containers, cpu_profile, gpuhost, paths, rootfs, sshd
from gpunode_lab.common import LabError, Progress, host_run, say, write_text

REQUIRED = {
    "lxc-create": "lxc", "lxc-start": "lxc", "lxc-attach": "lxc", "lxc-info": "lxc", "lxc-wait": "lxc",
    "lxc-stop": "lxc", "debootstrap": "debootstrap", "ssh-keygen": "openssh-client",
    "dpkg-scanpackages": "dpkg-dev", "chroot": "coreutils",
}


def _which(cmd: str) -> bool:
    return any(os.access(os.path.join(d, cmd), os.X_OK)
               for d in (os.environ.get("PATH", "") + ":/usr/sbin:/sbin").split(":") if d)


def preflight() -> None:
    if os.geteuid() != 0:
        raise LabError("the lab needs root (it runs LXC containers and an sshd)", hint="run it as root")
    missing = sorted({pkg for cmd, pkg in REQUIRED.items() if not _which(cmd)}
                     | ({"openssh-server"} if not Path(sshd.SSHD).exists() else set())
                     | ({"python3"} if not Path("/usr/bin/python3").exists() else set()))
    if missing:
        raise LabError("the lab's packages are missing: " + " ".join(missing),
                       hint="apt-get install openssh-server lxc lxc-templates debootstrap dpkg-dev python3")
    if not Path("/usr/share/lxc/templates/lxc-debian").exists():
        raise LabError("LXC's debian template is missing", hint="apt-get install lxc-templates")


@contextmanager
def _locked(progress: Progress | None = None, wait: float = 900) -> Iterator[None]:
    """One lab.up/down/destroy at a time on this machine; a second one waits its turn."""
    paths.CACHE.mkdir(parents=True, exist_ok=True)
    with open(paths.CACHE / "lab.lock", "w") as f:
        deadline = time.monotonic() + wait
        told = False
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LabError(f"another lab.up/down/destroy has run for over {wait:.0f} s",
                                   hint=f"see who holds {paths.CACHE / 'lab.lock'} (fuser -v)") from None
                if not told:
                    say(progress, "lab: waiting for another lab.up/down/destroy to finish")
                    told = True
                time.sleep(0.2)
        yield


# -- recorded nvidia-smi shapes ----------------------------------------------------------------

def shape_dirs() -> list[Path]:
    """Where recorded nvidia-smi shapes are looked up, first match wins."""
    found = []
    if os.environ.get("GPUNODE_LAB_SHAPES"):
        found.append(Path(os.environ["GPUNODE_LAB_SHAPES"]))
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "tests" / "data" / "nvidia-smi"
        if candidate.is_dir():
            found.append(candidate)
            break
    found.append(here.parent / "data" / "nvidia-smi")
    return found


def find_shape(name: str) -> Path | None:
    for d in shape_dirs():
        if (d / name / "nvidia-smi.txt").is_file():
            return d / name
    return None


def known_shapes() -> list[str]:
    names = set()
    for d in shape_dirs():
        if d.is_dir():
            names |= {p.name for p in d.iterdir() if (p / "nvidia-smi.txt").is_file()}
    return sorted(names)


def gpu_count(shape_dir: Path | None, name: str) -> int:
    if shape_dir and (shape_dir / "query-gpu.csv").exists():
        rows = [r for r in (shape_dir / "query-gpu.csv").read_text().splitlines() if r.strip()]
        rows = [r for r in rows if not r.lower().startswith(("index", "name"))]
        if rows:
            return len(rows)
    m = re.search(r"-x(\d+)$", name)
    return int(m.group(1)) if m else 1


def _sync_shape(name: str, shape_dir: Path | None, progress: Progress | None) -> None:
    """Fill the nvidia-smi share with the shape's files, in place (201 bind-mounts the folder)."""
    share = paths.SHARE_NVIDIA_SMI
    share.mkdir(parents=True, exist_ok=True)
    want = {p.name: p for p in shape_dir.iterdir() if p.is_file()} if shape_dir else {}
    for old in share.iterdir():
        if old.name not in want and old.name != ".lab-shape":
            old.unlink() if old.is_file() or old.is_symlink() else shutil.rmtree(old)
    for fname, src in want.items():
        data = src.read_bytes()
        dest = share / fname
        if not dest.exists() or dest.read_bytes() != data:
            tmp = share / f".{fname}.tmp"
            tmp.write_bytes(data)
            os.replace(tmp, dest)
    if shape_dir:
        write_text(share / ".lab-shape", name + "\n")
        say(progress, f"gpu shape: {name} (replayed from {shape_dir})")
    else:
        (share / ".lab-shape").unlink(missing_ok=True)
        say(progress, f"gpu shape: no recording named {name} yet; nvidia-smi in {paths.CT_GPU} says so")


# -- pct stand-in --------------------------------------------------------------------------------

PCT_LAUNCHER = f"""\
#!/usr/bin/python3 -IS
# STAND-IN for Proxmox VE's `pct`, installed by the gpunode lab (it is NOT Proxmox).
# The program is {paths.PCT_LIB}/gpunode_pct_standin.py (+ gpunode_pct_transfer.py for push/pull),
# copies of gpunode_lab/pct_standin.py and pct_transfer.py,
# byte-compiled there so that each call skips compiling it (start-up is most of its cost).
import sys

sys.path.insert(0, "{paths.PCT_LIB}")
import gpunode_pct_standin  # noqa: E402

sys.exit(gpunode_pct_standin.main(sys.argv[1:]))
"""


def _install_standins(progress: Progress | None) -> None:
    here = Path(__file__).parent
    changed = False
    for part in ("pct_standin", "pct_transfer"):
        module = paths.PCT_LIB / f"gpunode_{part}.py"
        if write_text(module, (here / f"{part}.py").read_text()) or not list(
                (paths.PCT_LIB / "__pycache__").glob(f"gpunode_{part}.*.pyc")):
            changed = True
            for old in (paths.PCT_LIB / "__pycache__").glob(f"gpunode_{part}.*.pyc"):
                old.unlink()
            # Compiled by the interpreter that runs it, so the cache matches its version.
            host_run(["/usr/bin/python3", "-I", "-m", "py_compile", str(module)],
                     what="byte-compiling the pct stand-in", hint="the lab needs /usr/bin/python3 (Debian's python3)")
    if write_text(paths.PCT, PCT_LAUNCHER, 0o755) or changed:
        say(progress, f"pct stand-in: installed at {paths.PCT}")


def _install_nvidia_smi(ct: containers.Container) -> None:
    script = Path(__file__).with_name("nvidia_smi_standin.py").read_bytes()
    containers.attach(ct, ["sh", "-c",
                           'set -e; f=/usr/bin/nvidia-smi; t=$(mktemp /usr/bin/.nvidia-smi.XXXXXX); cat > "$t"; '
                           'if cmp -s "$t" "$f"; then rm -f "$t"; else chmod 755 "$t"; mv -f "$t" "$f"; fi'],
                      input=script, what="installing the nvidia-smi stand-in")


# -- the API -------------------------------------------------------------------------------------

def up(gpu_shape: str = paths.DEFAULT_GPU_SHAPE, progress: Progress | None = None,
       cpu_profile_files: bool = True) -> dict[str, Any]:
    """Bring the lab up (idempotent) and return status().

    cpu_profile_files=False skips the cpu profile's wheelhouse and model (they need
    PyPI on the first run): for a lab used for the gpu profile only, or offline.
    """
    started = time.monotonic()
    shape_dir = find_shape(gpu_shape)
    if shape_dir is None and gpu_shape != paths.DEFAULT_GPU_SHAPE:
        raise LabError(f"no recorded nvidia-smi shape named {gpu_shape!r}",
                       hint="known shapes: " + (", ".join(known_shapes()) or "none yet")
                       + f" (folders with nvidia-smi.txt under {', '.join(map(str, shape_dirs()))})")
    preflight()
    with _locked(progress):
        for d in (paths.STATE, paths.RUN, paths.BIN, paths.PVE_LXC, paths.LXC_PATH, paths.SHARE_APT,
                  paths.SHARE_WHEELS, paths.SHARE_MODELS, paths.SHARE_NVIDIA_SMI):
            d.mkdir(parents=True, exist_ok=True)
        if not rootfs.base_ready():
            # The containers are overlays of the base: they go with it.
            for ct in containers.lab_containers():
                if ct.dir.exists():
                    say(progress, f"container {ct.vmid}: removed, the base rootfs is rebuilt")
                    containers.remove(ct)
        rootfs.ensure_base(progress)
        if not rootfs.debs_ready():
            # The download works inside the base rootfs: no container may run on it meanwhile.
            for ct in containers.lab_containers():
                containers.stop(ct, progress)
        rootfs.ensure_debs(progress)
        rootfs.ensure_repo(progress)
        _sync_shape(gpu_shape, shape_dir, progress)
        _install_standins(progress)
        gpuhost.ensure(gpu_count(shape_dir, gpu_shape))  # the stand-in GPU host for `inv onboard --gpus`
        running = containers.active()
        for ct in containers.lab_containers(gpu_count(shape_dir, gpu_shape)):
            changed = containers.ensure(ct, progress)
            is_running = ct.name in running
            if changed and is_running:
                say(progress, f"container {ct.vmid}: its config changed, restarting it")
                containers.stop(ct, progress)
                is_running = False
            if ct.running and not is_running:
                containers.start(ct, progress)
            elif not ct.running and is_running:
                containers.stop(ct, progress)
            if ct.profile == "gpu" and ct.running:
                _install_nvidia_smi(ct)
        restart = sshd.ensure_files()
        sshd.start(progress, restart=restart)
        if cpu_profile_files:
            cpu_profile.prepare(progress)
        took = time.monotonic() - started
        record = {"gpu_shape": gpu_shape, "gpu_recording": shape_dir is not None,
                  "shape_dir": str(shape_dir) if shape_dir else None, "last_up_seconds": round(took, 2)}
        write_text(paths.LAB_STATE_FILE, json.dumps(record, indent=2) + "\n")
        say(progress, f"lab: up in {took:.1f} s (ssh root@{paths.SSH_ADDRESS} -p {paths.SSH_PORT} "
            f"-i {paths.CLIENT_KEY}; pct at {paths.PCT})")
    return status()


def down(progress: Progress | None = None) -> dict[str, Any]:
    """Stop the containers and sshd; keep containers, state and caches for a fast next up()."""
    with _locked(progress):
        running = containers.active()
        for ct in containers.every_container():
            if ct.name in running:
                containers.stop(ct, progress)
        sshd.stop(progress)
        leftovers = containers.active()
        if leftovers:
            raise LabError("containers still running after down: " + ", ".join(sorted(leftovers)),
                           hint=f"lxc-stop -P {paths.LXC_PATH} -n <vmid> --kill")
    say(progress, "lab: down (nothing of it runs; caches kept)")
    return status()


def destroy(progress: Progress | None = None) -> dict[str, Any]:
    """down(), then remove the containers and all state; the cache under /var/cache stays."""
    down(progress)
    with _locked(progress):
        for ct in containers.every_container():
            containers.remove(ct)
        if paths.STATE.exists():
            containers.remove_cgroups()  # named by the state folder: before it goes
            # Its contents, then the folder itself unless something is mounted on it.
            for entry in paths.STATE.iterdir():
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
            try:
                paths.STATE.rmdir()
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    raise
    say(progress, f"lab: destroyed {paths.STATE} (cache kept in {paths.CACHE})")
    return status()


def status() -> dict[str, Any]:
    """What runs and where: plain data, cheap (no container is entered)."""
    running = containers.active()
    cts = {}
    for ct in containers.lab_containers():
        cts[ct.vmid] = {"state": containers.state(ct, running), "profile": ct.profile, "hostname": ct.hostname,
                        "wanted": "running" if ct.running else "stopped", "pve_config": str(ct.pve_conf)}
    others = {ct.vmid: {"state": containers.state(ct, running)} for ct in containers.every_container()
              if ct.profile == "other"}
    sshd_pid = sshd.pid()
    try:
        record = json.loads(paths.LAB_STATE_FILE.read_text())
    except (FileNotFoundError, ValueError):
        record = {}
    ready = bool(sshd_pid) and all(c["state"] == c["wanted"] for c in cts.values()) and paths.PCT.exists()
    return {
        "up": ready,
        "node": paths.NODE,
        "sshd": {"running": bool(sshd_pid), "pid": sshd_pid, "address": paths.SSH_ADDRESS,
                 "port": paths.SSH_PORT, "user": paths.SSH_USER, "key_file": str(paths.CLIENT_KEY),
                 "known_hosts": str(paths.KNOWN_HOSTS)},
        "pct": str(paths.PCT),
        "containers": cts,
        "other_containers": others,  # made by someone else under the lab's lxcpath; down() stops them too
        "gpu_shape": record.get("gpu_shape"),
        "gpu_recording": record.get("gpu_recording", False),
        "base_cached": rootfs.base_ready(),
        "apt_packages": len(list(paths.SHARE_APT.glob("*.deb"))) if paths.SHARE_APT.exists() else 0,
        "last_up_seconds": record.get("last_up_seconds"),
    }
