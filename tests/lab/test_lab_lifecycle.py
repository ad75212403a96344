"""up / down / destroy of a whole second lab, in private mount and network namespaces.

The live lab keeps running for the other tests: the second one gets an empty state folder
mounted over /var/lib/gpunode-lab and its own loopback (LXC's command sockets and port 2222
are per network namespace); it shares the cached base rootfs and packages.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SHAPES = Path(__file__).resolve().parents[1] / "data" / "nvidia-smi"

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare"),
]

SCRIPT = textwrap.dedent("""
    import json, os, subprocess, sys
    import gpunode_lab as lab

    def mine():
        # Processes in this network namespace, other than this one and its ancestors.
        me, ancestors = os.readlink("/proc/self/ns/net"), set()
        pid = os.getpid()
        while pid > 1:
            ancestors.add(pid)
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        found = []
        for p in filter(str.isdigit, os.listdir("/proc")):
            try:
                if int(p) not in ancestors and os.readlink(f"/proc/{p}/ns/net") == me:
                    found.append(open(f"/proc/{p}/cmdline", "rb").read().replace(b"\\0", b" ").decode()[:120])
            except OSError:
                pass
        return found

    out = {}
    # No network in this namespace: the cpu profile's wheels and model (from PyPI) are skipped.
    st = lab.up(cpu_profile_files=False)
    out["up"] = st["up"]
    out["states"] = {str(k): v["state"] for k, v in st["containers"].items()}
    lines = []
    lab.up(progress=lines.append, cpu_profile_files=False)
    out["again_lines"] = lines
    r = subprocess.run(["/var/lib/gpunode-lab/bin/pct", "exec", "200", "--", "cat", "/etc/hostname"],
                       capture_output=True, text=True)
    out["pct"] = [r.returncode, r.stdout, r.stderr]
    def pct(*args):
        r = subprocess.run(["/var/lib/gpunode-lab/bin/pct", *args], capture_output=True, text=True)
        return [r.returncode, r.stdout, r.stderr]

    out["start_202"] = [pct("start", "202")[0], pct("status", "202"), pct("start", "202")]
    out["stop_202"] = [pct("stop", "202")[0], pct("status", "202"), pct("stop", "202")]
    shapes = [n for n in ("h200-x1",) if os.path.isdir(f"{os.environ['SHAPES']}/{n}")]
    if shapes:
        lab.up(gpu_shape=shapes[0], cpu_profile_files=False)
        out["shape"] = [shapes[0], pct("exec", "201", "--", "nvidia-smi")[1],
                        pct("config", "201")[1].count("/dev/nvidia")]
    lab.down()
    out["after_down"] = mine()
    out["status_after_down"] = lab.status()["up"]
    warm = []
    out["warm_up"] = lab.up(progress=warm.append, cpu_profile_files=False)["up"]
    out["warm_lines"] = warm
    from gpunode_lab import containers
    cg = containers.cgroup_folder()  # this lab's own cgroup folder, named by its state folder
    lab.destroy()
    tops = ["/sys/fs/cgroup", *(f"/sys/fs/cgroup/{d}" for d in os.listdir("/sys/fs/cgroup"))]
    out["cgroups_left"] = [t for t in tops if os.path.isdir(f"{t}/{cg}")]
    out["after_destroy"] = mine()
    out["state_left"] = os.listdir("/var/lib/gpunode-lab")
    print(json.dumps(out))
""")


def test_up_down_destroy_of_a_second_lab(lab, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    shell = (f"ip link set lo up && mount --bind {state} /var/lib/gpunode-lab && "
             f"exec {sys.executable} -c \"$1\"")
    proc = subprocess.run(["unshare", "-m", "-n", "--propagation", "private", "sh", "-c", shell, "sh", SCRIPT],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "SHAPES": str(SHAPES)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["up"] and out["states"] == {"200": "running", "201": "running", "202": "stopped"}
    assert out["pct"] == [0, "lab-cpu\n", ""]
    # A second up changes nothing (how fast it is, is bench's to measure, not a test's).
    assert not [line for line in out["again_lines"] if "started" in line or "created" in line], out["again_lines"]
    # pct start/stop like real pct, messages included.
    assert out["start_202"] == [0, [0, "status: running\n", ""], [255, "", "CT 202 already running\n"]]
    assert out["stop_202"] == [0, [0, "status: stopped\n", ""], [255, "", "CT 202 not running\n"]]
    # Another recorded shape replaces what nvidia-smi replays in 201, and the devN lines.
    if "shape" in out:
        name, table, devices = out["shape"]
        assert table == (SHAPES / name / "nvidia-smi.txt").read_text()
        assert devices == 1 + 3  # /dev/nvidia0, nvidiactl, nvidia-uvm, nvidia-uvm-tools
    # Nothing of the lab runs after down (no sshd, no LXC monitor, no container).
    assert out["after_down"] == [] and out["status_after_down"] is False
    # Up after down starts from the caches: nothing is built or downloaded again.
    assert out["warm_up"]
    assert any(line.startswith("base rootfs: cached") for line in out["warm_lines"]), out["warm_lines"]
    assert any(line.startswith("apt packages: cached") for line in out["warm_lines"]), out["warm_lines"]
    assert out["after_destroy"] == [] and out["state_left"] == []
    assert out["cgroups_left"] == [], "destroy leaves none of the lab's cgroup folders"
