"""The NVIDIA driver's user-space inside a container, at exactly the host's version.

A container uses the host's kernel module but its own libcuda/libnvidia-ml/nvidia-smi; when
the two differ, NVML refuses ("Driver/library version mismatch"). onboard installs the
user-space the way the host got its driver:

- NVIDIA's .run: NVIDIA-Linux-x86_64-<v>.run is fetched once per node onto the host
  (/var/cache/gpunode/nvidia/, from `nvidia_installer_url`), pushed into the container with
  `pct push` and run there with --silent --no-kernel-module;
- distribution packages: the host's user-space packages (libcuda1, libnvidia-ml1,
  nvidia-smi, nvidia-driver-cuda) pinned to the host's exact package versions, with apt in
  the container (it needs the same repository the host used);

then checks that nvidia-smi in the container answers at the host's version and lists the
GPUs passed in. With the version already right nothing is installed (a re-run only reads).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpunode import shell
from gpunode.errors import PveError
from gpunode.facts import cuda, gpu
from gpunode.pve.hostfacts import INSTALLER_CACHE, HostFacts

# NVIDIA's download server layout for Linux x86_64 drivers (datacenter builds also live under
# https://us.download.nvidia.com/tesla/{version}/); set nvidia_installer_url where yours differ.
DEFAULT_URL = "https://us.download.nvidia.com/XFree86/Linux-x86_64/{version}/NVIDIA-Linux-x86_64-{version}.run"
USERSPACE_PACKAGES = ("libcuda1", "libnvidia-ml1", "nvidia-smi", "nvidia-driver-cuda", "libnvidia-ptxjitcompiler1")
CT_INSTALLER_DIR = "/root"


def installer_name(version: str) -> str:
    return f"NVIDIA-Linux-x86_64-{version}.run"


@dataclass(frozen=True)
class State:
    version: str | None         # libcuda.so.<v> (or libnvidia-ml) in the container; None: not installed
    smi: bool                   # nvidia-smi present


def probe_ct(ct: Any) -> State:
    body = next(s.body for s in cuda.SNIPPETS if s.name == "libs")
    out = ct.script(body + "\ncommand -v nvidia-smi >/dev/null 2>&1 && echo '@smi yes'; true",
                    what="reading the container's NVIDIA libraries").stdout
    libs = cuda.parse_libs(out)
    return State(libs.libcuda_version or libs.nvml_version, "@smi yes" in out)


def plan_lines(facts: HostFacts, state: State | None, url: str) -> list[str]:
    want = facts.driver
    have = "not installed" if state is None or state.version is None else state.version
    if state is not None and state.version == want:
        return [f"driver user-space in the CT: {want} (matches the host)"]
    how = {"run": f"NVIDIA .run --silent --no-kernel-module ({installer_name(want or '?')}"
                  + (", already on the host)" if installer_name(want or "") in facts.installers
                     else f", fetched once onto the host from {url.format(version=want)})"),
           "packages": "apt: " + " ".join(f"{p.name}={p.version}" for p in userspace_packages(facts)),
           "unknown": "(cannot: the host's driver came neither from a .run nor from packages)"}[facts.install]
    return [f"driver user-space in the CT: {have} -> {want}, by {how}"]


def userspace_packages(facts: HostFacts) -> list[Any]:
    return [p for p in facts.driver_packages if p.name in USERSPACE_PACKAGES]


def fetch_installer(host: Any, facts: HostFacts, url: str) -> str:
    """The installer's path on the host, downloaded into the node's cache when not there yet."""
    version = facts.driver or ""
    path = f"{facts.root}{INSTALLER_CACHE}/{installer_name(version)}"
    if installer_name(version) in facts.installers:
        return path
    src = url.format(version=version)
    result = host.script(shell.script("gpunode.pve", "fetch-installer.sh"), path, src,
                         what=f"fetching {installer_name(version)} onto the host")
    if not result.ok:
        raise PveError(f"could not fetch {installer_name(version)} onto the host from {src}",
                       evidence=result.stderr[-1500:],
                       hint="set the inventory host var nvidia_installer_url to where that version's .run "
                       "lives ({version} is replaced), or put the file at " + path)
    return path


def install(host: Any, ct: Any, facts: HostFacts, vmid: int, pct: str, url: str) -> str:
    """Install the host's version into the container; returns what was done."""
    version = facts.driver or ""
    if facts.install == "run":
        src = fetch_installer(host, facts, url)
        dest = f"{CT_INSTALLER_DIR}/{installer_name(version)}"
        host.run([pct, "push", str(vmid), src, dest, "--perms", "0755"], check=True,
                 what=f"pushing {installer_name(version)} into CT {vmid}")
        result = ct.run(["sh", dest, "--silent", "--no-kernel-module"], what=f"running {installer_name(version)}")
        ct.run(["rm", "-f", dest])
        if not result.ok:
            raise PveError(f"{installer_name(version)} --silent --no-kernel-module failed in CT {vmid} "
                           f"(exit {result.exit_code})", evidence=(result.stderr + result.stdout)[-2000:],
                           hint="see /var/log/nvidia-installer.log in the container; fix what it names and "
                           "run onboard again")
        return f"installed {version} by {installer_name(version)} --silent --no-kernel-module"
    if facts.install == "packages":
        pkgs = [f"{p.name}={p.version}" for p in userspace_packages(facts)]
        if not pkgs:
            raise PveError(f"the host's driver packages of {version} include no user-space package "
                           f"({', '.join(USERSPACE_PACKAGES)})", hint="install the user-space in the CT by hand")
        result = ct.script("export DEBIAN_FRONTEND=noninteractive; apt-get update -q && apt-get install -y -q "
                           '--no-install-recommends --allow-downgrades "$@"', *pkgs,
                           what="installing the driver packages")
        if not result.ok:
            raise PveError(f"apt could not install {' '.join(pkgs)} in CT {vmid}", evidence=result.stderr[-2000:],
                           hint="the CT needs the apt repository the host's driver came from (same suite and "
                           "component), then run onboard again")
        return f"installed {version} from packages {' '.join(pkgs)}"
    raise PveError(f"cannot tell how the host's NVIDIA driver {version} was installed (no /usr/bin/nvidia-uninstall, "
                   "no packages of that version)",
                   hint=f"install the same version's user-space in CT {vmid} by hand (NVIDIA .run with "
                   "--no-kernel-module), then run onboard again")


def verify(ct: Any, facts: HostFacts, gpus: list[int], vmid: int) -> list[Any]:
    """nvidia-smi in the container must answer at the host's version and list the passed GPUs."""
    result = ct.run(["nvidia-smi", *gpu.QUERY_ARGS], what="nvidia-smi in the container")
    view = gpu.parse_query(result.stdout) if result.ok else gpu.SmiView()
    listed = view.gpus
    if not result.ok or len(listed) != len(gpus):
        raise PveError(f"nvidia-smi in CT {vmid} does not list the {len(gpus)} GPU(s) passed in "
                       f"(it listed {len(listed)}; exit {result.exit_code})",
                       evidence=(result.stdout + result.stderr)[-1500:],
                       hint="check the passthrough (devN entries or lxc.* lines) and that /dev/nvidia-uvm exists "
                       "on the host; then run onboard again")
    if view.driver and view.driver != facts.driver:
        raise PveError(f"nvidia-smi in CT {vmid} reports driver {view.driver}, the host's module is {facts.driver}",
                       hint="run onboard again; it reinstalls the host's version")
    return list(listed)
