"""inv onboard --gpus end to end in the lab: host facts of the stand-in GPU host, devN passthrough,
the driver's user-space installed in a fresh container at the host's version by the stand-in
.run, nvidia-smi (stand-in) listing the GPUs inside; a re-run changes nothing; a host driver
upgrade makes `inv provision` refuse with both versions, and onboard repairs it.

Container 276 belongs to this file; it is removed before and after. The stand-in host
(gpunode_lab.gpuhost) is made here and its driver version put back afterwards.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode.facts import gpu as gpufacts
from gpunode.pve.hostfacts import INSTALLER_CACHE
from gpunode_lab import gpuhost, paths, pve_api
from tests.lab.onboard_helpers import pve_inventory, remove_pve_container
from tests.lab.provision_helpers import INV, REPO, Attached, lab_host, snapshot, write_inventory

pytestmark = pytest.mark.lab
VMID = 276
TOKEN_ID, SECRET = "root@pam!gpunode", "lab-token-driver-7c2e"
OLD, NEW = "590.48.01", "595.58.03"   # the recording's driver, and the "upgrade"
GPUNODE = [sys.executable, "-c", "from gpunode.cli.main import main; main()"]
CACHE = Path(f"{gpuhost.ROOT}{INSTALLER_CACHE}")


@pytest.fixture(scope="module")
def api(lab):
    before = gpuhost.driver()
    gpuhost.ensure(gpus=8, version=OLD)
    gpuhost.set_install("run")
    for f in CACHE.glob("*.run"):
        f.unlink()  # "fetched once per node": start from a node that has not fetched it
    remove_pve_container(VMID)
    server = pve_api.serve_in_thread({TOKEN_ID: SECRET})
    yield server
    server.shutdown()
    remove_pve_container(VMID)
    gpuhost.set_driver(before or OLD)


@pytest.fixture(scope="module")
def inv(api, tmp_path_factory) -> Path:
    f = tmp_path_factory.mktemp("inv") / "hosts.yml"
    f.write_text(pve_inventory(api.port, TOKEN_ID, SECRET, host_vars=f"""\
      host_root: {gpuhost.ROOT}
      nvidia_installer_url: "{gpuhost.INSTALLER_URL}"
"""))
    return f


def onboard(inv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GPUNODE, "onboard", "--host", "lab", "-i", str(inv), "--ct", str(VMID), "--gpus", "0,1",
                           "--memory", "4096", "--mount", f"{paths.SHARE_MODELS}:{paths.CT_MODELS}", *args],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})


def smi_in_ct() -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(paths.PCT), "exec", str(VMID), "--", "nvidia-smi", *gpufacts.QUERY_ARGS],
                          capture_output=True, text=True, timeout=60)


def provision_check(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    gpu_vars = lab_host()["containers"][paths.CT_GPU]["vars"]
    inventory = write_inventory(tmp_path / "prov.yml", {VMID: {"gpus": [0, 1], "vars": gpu_vars}})
    return subprocess.run([str(INV), "provision", "-i", str(inventory), "--host", "lab", "--ct", str(VMID), "--check"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)


def test_onboard_installs_the_hosts_driver_version_and_a_rerun_changes_nothing(api, inv, tmp_path):
    first = onboard(inv)
    assert first.returncode == 0, first.stderr + first.stdout
    out = first.stdout
    assert "host: Proxmox VE 8.2.4" in out and f"host: NVIDIA driver {OLD}, installed by NVIDIA .run installer" in out
    assert "host: passthrough by devN entries" in out and "/dev/nvidia-uvm yes" in out
    assert f"driver user-space in the CT: not installed -> {OLD}" in out
    assert f"installed {OLD} by NVIDIA-Linux-x86_64-{OLD}.run --silent --no-kernel-module" in out
    assert f"nvidia-smi in CT {VMID}: 2 GPU(s) at driver {OLD}" in out

    # What a user checks: the CT's config passes the host's nodes, nvidia-smi inside answers.
    config = subprocess.run([str(paths.PCT), "config", str(VMID)], capture_output=True, text=True, check=True).stdout
    for node in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        assert f": {gpuhost.ROOT}/dev/{node}\n" in config
    assert f"{gpuhost.ROOT}/dev/nvidia2" not in config
    smi = smi_in_ct()
    assert smi.returncode == 0, smi.stderr
    view = gpufacts.parse_query(smi.stdout)
    assert [g.index for g in view.gpus] == [0, 1] and view.driver == OLD
    box = Attached(VMID)
    assert box.sh("readlink /usr/lib/x86_64-linux-gnu/libcuda.so.1").out.strip() == f"libcuda.so.{OLD}"
    assert box.sh("stat -c '%F %t:%T' /dev/nvidia1").out.strip() == "character special file c3:1"
    cached = CACHE / f"NVIDIA-Linux-x86_64-{OLD}.run"
    assert cached.is_file() and not box.exists(f"/root/NVIDIA-Linux-x86_64-{OLD}.run")
    cached_at = cached.stat().st_mtime_ns

    watched = ["/etc", "/usr/bin", "/usr/lib/x86_64-linux-gnu", "/root"]
    before = snapshot(box.sh, watched) + box.sh("stat -c %Y /var/log/nvidia-installer.log").out
    conf_before = (paths.PVE_LXC / f"{VMID}.conf").read_bytes()
    n = len(api.api.requests)
    again = onboard(inv)
    assert again.returncode == 0, again.stderr + again.stdout
    assert f"CT {VMID} on node lab: config already as wanted" in again.stdout
    assert f"driver user-space in the CT: {OLD} (matches the host)" in again.stdout
    assert f"lab/{VMID}: unchanged, running" in again.stdout and f"CT {VMID}: installed" not in again.stdout
    assert {m for m, _, _ in api.api.requests[n:]} == {"GET"}
    assert (paths.PVE_LXC / f"{VMID}.conf").read_bytes() == conf_before
    assert snapshot(box.sh, watched) + box.sh("stat -c %Y /var/log/nvidia-installer.log").out == before
    assert cached.stat().st_mtime_ns == cached_at


def test_a_host_driver_upgrade_is_refused_by_provision_and_repaired_by_onboard(api, inv, tmp_path):
    gpuhost.set_driver(NEW)
    smi = smi_in_ct()
    assert smi.returncode == 18 and "Driver/library version mismatch" in smi.stdout  # what the user would see

    refused = provision_check(tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    said = refused.stdout + refused.stderr
    assert f"user-space libraries are {OLD} but the kernel module is {NEW}" in said
    # the hint names the command the user ran, with their -i (issue 43)
    assert re.search(rf"re-run inv onboard (-i \S+ )?--host lab --ct {VMID} --gpus 0,1", said), said
    assert "Traceback" not in said

    checked = onboard(inv, "--check")
    assert checked.returncode == 0, checked.stderr
    assert f"driver user-space in the CT: {OLD} -> {NEW}" in checked.stdout
    assert smi_in_ct().returncode == 18  # --check changed nothing

    repaired = onboard(inv)
    assert repaired.returncode == 0, repaired.stderr + repaired.stdout
    assert f"installed {NEW} by NVIDIA-Linux-x86_64-{NEW}.run" in repaired.stdout
    assert f"lab/{VMID}: updated, running" in repaired.stdout
    view = gpufacts.parse_query(smi_in_ct().stdout)
    assert [g.index for g in view.gpus] == [0, 1] and view.driver == NEW

    after = provision_check(tmp_path)
    said = after.stdout + after.stderr
    assert "driver mismatch" not in said
    assert after.returncode == 0, said[-3000:]


CLASSIC = 277  # a second CT of this file, on the stand-in host made to look like Proxmox VE 8.0


def test_classic_passthrough_on_an_older_proxmox(api, inv):
    conf = paths.PVE_LXC / f"{CLASSIC}.conf"
    remove_pve_container(CLASSIC)
    # The lab keeps PVE's configs under its own folder; a real node has /etc/pve/lxc.
    extra = f"      pve_conf_dir: {paths.PVE_LXC}\n"
    inv.write_text(inv.read_text().replace("      host_root:", extra + "      host_root:"))
    gpuhost.set_pve("8.0.3")
    try:
        argv = [*GPUNODE, "onboard", "--host", "lab", "-i", str(inv), "--ct", str(CLASSIC), "--gpus", "1",
                "--memory", "2048"]
        first = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert first.returncode == 0, first.stderr + first.stdout
        assert "host: passthrough by classic lxc.cgroup2 + lxc.mount.entry lines (Proxmox VE < 8.2)" in first.stdout
        text = conf.read_text()
        assert "lxc.cgroup2.devices.allow: c 195:* rwm\n" in text
        assert f"lxc.cgroup2.devices.allow: c {gpuhost.UVM_MAJOR}:* rwm\n" in text  # read from /proc/devices
        assert f"lxc.mount.entry: {gpuhost.ROOT}/dev/nvidia1 dev/nvidia1 none bind,optional,create=file\n" in text
        assert "dev0:" not in text
        view = gpufacts.parse_query(subprocess.run(
            [str(paths.PCT), "exec", str(CLASSIC), "--", "nvidia-smi", *gpufacts.QUERY_ARGS],
            capture_output=True, text=True, timeout=60).stdout)
        assert [g.index for g in view.gpus] == [1] and view.driver == gpuhost.driver()

        again = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr + again.stdout
        assert f"lab/{CLASSIC}: unchanged, running" in again.stdout and conf.read_text() == text
    finally:
        gpuhost.set_pve(gpuhost.PVE_VERSION)
        remove_pve_container(CLASSIC)


PACKAGED = 278  # a third CT of this file, on the stand-in host made to look like a packaged driver


def test_packaged_driver_is_matched_with_the_same_packages(api, inv):
    remove_pve_container(PACKAGED)
    gpuhost.set_install("packages")
    version = gpuhost.driver()
    argv = [*GPUNODE, "onboard", "--host", "lab", "-i", str(inv), "--ct", str(PACKAGED), "--gpus", "0",
            "--memory", "2048", "--mount", f"{paths.SHARE_APT}:{paths.CT_APT}"]
    try:
        # The CT does not know the repository the host's packages came from: a clear refusal.
        first = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert first.returncode == 2, first.stdout + first.stderr
        assert f"host: NVIDIA driver {version}, installed by packages" in first.stdout
        assert f"apt could not install libcuda1={version}-1 libnvidia-ml1={version}-1 nvidia-smi={version}-1" \
            in first.stderr
        assert "needs the apt repository the host's driver came from" in first.stderr
        box = Attached(PACKAGED)
        box.sh(f"echo 'deb [trusted=yes] file:{gpuhost.CT_APT} ./' > /etc/apt/sources.list.d/nvidia-lab.list")

        second = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert second.returncode == 0, second.stdout + second.stderr
        assert f"installed {version} from packages libcuda1={version}-1" in second.stdout
        assert box.sh("dpkg-query -W -f '${Version}' nvidia-smi").out == f"{version}-1"
        view = gpufacts.parse_query(subprocess.run(
            [str(paths.PCT), "exec", str(PACKAGED), "--", "nvidia-smi", *gpufacts.QUERY_ARGS],
            capture_output=True, text=True, timeout=60).stdout)
        assert [g.index for g in view.gpus] == [0] and view.driver == version

        third = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert third.returncode == 0 and f"lab/{PACKAGED}: unchanged, running" in third.stdout
    finally:
        gpuhost.set_install("run")
        remove_pve_container(PACKAGED)
