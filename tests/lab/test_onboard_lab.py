"""inv onboard against the lab: PVE API stand-in (HTTPS, token) -> real LXC containers -> pct stand-in.

Containers 230-239 belong to this file; they are removed before and after.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpunode import inventory
from gpunode.errors import PveError
from gpunode.pve import containers as pvect
from gpunode.pve import tasks
from gpunode.pve.client import PveClient, PveSettings
from gpunode_lab import containers, paths, pve_api
from tests.lab.onboard_helpers import pve_inventory, remove_pve_container

pytestmark = pytest.mark.lab
TOKEN_ID, SECRET = "root@pam!gpunode", "lab-token-4f1c9e2a"
OURS = range(230, 240)
GPUNODE = [sys.executable, "-c", "from gpunode.cli.main import main; main()"]


def cleanup() -> None:
    for vmid in OURS:
        if (paths.PVE_LXC / f"{vmid}.conf").exists() or (paths.LXC_PATH / str(vmid)).exists():
            remove_pve_container(vmid)


@pytest.fixture(scope="module")
def api(lab):
    cleanup()
    server = pve_api.serve_in_thread({TOKEN_ID: SECRET})
    yield server
    server.shutdown()
    cleanup()


def client(api, secret: str = SECRET) -> PveClient:
    return PveClient(PveSettings("127.0.0.1", "root@pam", "gpunode", secret, port=api.port,
                                 verify_ssl=str(pve_api.CERT), timeout=30))


@pytest.fixture
def inv(api, tmp_path) -> Path:
    f = tmp_path / "hosts.yml"
    f.write_text(pve_inventory(api.port, TOKEN_ID, SECRET,
                               comment="lab inventory for the onboard test; this comment must survive",
                               containers="    containers:\n      200: {}   # the lab's cpu container\n"))
    return f


def onboard(inv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GPUNODE, "onboard", "--host", "lab", "-i", str(inv), *args], capture_output=True,
                          text=True, timeout=180, env={**os.environ, "COLUMNS": "200"})


def pct(*args: str) -> str:
    return subprocess.run([str(paths.PCT), *args], capture_output=True, text=True, check=True).stdout


def puts(api) -> list[dict[str, str]]:
    return [p for m, _, p in api.api.requests if m == "PUT"]


def test_onboard_creates_a_running_container_and_lists_it(api, inv):
    mount = f"{paths.SHARE_MODELS}:/mnt/models"
    first = onboard(inv, "--ct", "230", "--memory", "1024", "--mount", mount)
    assert first.returncode == 0, first.stderr
    assert "create CT 230 on node lab:" in first.stdout and "lab/230: created, running" in first.stdout
    assert pct("exec", "230", "--", "ps", "-p", "1", "-o", "comm=").strip() == "systemd"
    assert pct("exec", "230", "--", "test", "-d", "/mnt/models/tiny-qwen3") == ""
    config = pct("config", "230")
    assert "memory: 1024\n" in config and f"mp0: {mount.replace(':', ',mp=')},ro=1\n" in config
    text = inv.read_text()
    assert text.startswith("# lab inventory for the onboard test; this comment must survive")
    assert inventory.load(inv).hosts["lab"].containers[230].gpus is None

    conf_before = (paths.PVE_LXC / "230.conf").read_bytes()
    n = len(api.api.requests)
    again = onboard(inv, "--ct", "230", "--memory", "1024", "--mount", mount)
    assert again.returncode == 0, again.stderr
    assert "CT 230 on node lab: config already as wanted" in again.stdout
    assert "lab/230 already listed" in again.stdout and "lab/230: unchanged, running" in again.stdout
    assert [m for m, _, _ in api.api.requests[n:]] == ["GET"] * len(api.api.requests[n:])
    assert (paths.PVE_LXC / "230.conf").read_bytes() == conf_before and inv.read_text() == text

    checked = onboard(inv, "--ct", "230", "--memory", "1536", "--mount", mount, "--check")
    assert checked.returncode == 0 and "memory: 1024 -> 1536" in checked.stdout
    assert "check mode: nothing was changed" in checked.stdout
    assert (paths.PVE_LXC / "230.conf").read_bytes() == conf_before

    n_puts = len(puts(api))
    changed = onboard(inv, "--ct", "230", "--memory", "1536", "--mount", mount)
    assert changed.returncode == 0, changed.stderr
    new_puts = puts(api)[n_puts:]
    assert len(new_puts) == 1 and set(new_puts[0]) == {"memory", "digest"} and new_puts[0]["memory"] == "1536"
    # hot-plugged into the running container, on its limiting cgroup as PVE does
    limit = containers.memory_limit_file(230).read_text()
    assert int(limit) == 1536 * 1024 * 1024


def test_bad_token_is_a_clear_401(api, inv):
    inv.write_text(inv.read_text().replace(SECRET, "wrong-secret-123"))
    out = onboard(inv, "--ct", "231")
    assert out.returncode == 2
    assert f"refused token {TOKEN_ID} (401" in out.stderr and "wrong-secret-123" not in out.stderr
    assert not (paths.PVE_LXC / "231.conf").exists()


def test_unknown_node(api, inv):
    inv.write_text(inv.read_text().replace("    vars:\n", "    node: pve-nosuch\n    vars:\n", 1))
    out = onboard(inv, "--ct", "231")
    assert out.returncode == 2
    assert "node 'pve-nosuch' is not in the cluster" in out.stderr and "nodes there: lab" in out.stderr
    with pytest.raises(PveError, match="hostname lookup 'pve-nosuch' failed"):
        client(api).get("nodes/pve-nosuch/lxc")


def test_vmid_clash_is_refused_not_taken_over(api, inv):
    c = client(api)
    upid = c.call("POST", "nodes/lab/lxc", vmid=232, ostemplate="local:vztmpl/x.tar.zst", hostname="someone-else")
    tasks.wait(c, upid, timeout=60)
    out = onboard(inv, "--ct", "232", "--memory", "1024")
    assert out.returncode == 2
    assert "CT 232 already exists on node lab as 'someone-else'" in out.stderr and "refusing" in out.stderr
    with pytest.raises(PveError, match="CT 232 already exists on node 'lab'"):
        c.call("POST", "nodes/lab/lxc", vmid=232, ostemplate="local:vztmpl/x.tar.zst")
    assert pvect.exists(c, "lab", 232)["name"] == "someone-else"


def test_gpus_without_device_nodes_on_the_host(api, inv):
    out = onboard(inv, "--ct", "233", "--gpus", "0,1")
    assert out.returncode == 2
    assert "/dev/nvidia0, /dev/nvidia1 do not exist on host lab" in out.stderr
    assert not (paths.PVE_LXC / "233.conf").exists()


def test_failed_start_task_carries_its_log_and_stale_digest_is_refused(api):
    c = client(api)
    tasks.wait(c, c.call("POST", "nodes/lab/lxc", vmid=234, ostemplate="local:vztmpl/x.tar.zst"), timeout=60)
    with pytest.raises(PveError, match="Device /dev/nvidia0 does not exist"):
        c.call("PUT", "nodes/lab/lxc/234/config", dev0="/dev/nvidia0")
    conf = c.get("nodes/lab/lxc/234/config")
    # The driver vanished after the entry was written (a host reboot without nvidia-uvm, say).
    path = paths.PVE_LXC / "234.conf"
    path.write_text(path.read_text() + "dev0: /dev/nvidia-uvm\n")
    with pytest.raises(PveError) as err:
        tasks.wait(c, c.call("POST", "nodes/lab/lxc/234/status/start"), what="start CT 234", timeout=60)
    assert "task start CT 234 failed on node lab: Device /dev/nvidia-uvm does not exist" in str(err.value)
    assert "TASK ERROR: Device /dev/nvidia-uvm does not exist" in err.value.evidence
    with pytest.raises(PveError, match="detected modified configuration"):
        c.call("PUT", "nodes/lab/lxc/234/config", memory=2048, digest=conf["digest"])
