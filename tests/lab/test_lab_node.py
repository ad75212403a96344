"""The lab node itself: containers as promised, pct stand-in behaving like real pct over SSH."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from gpunode.transport import PctTransport
from gpunode_lab import containers, paths

pytestmark = pytest.mark.lab

PCT = str(paths.PCT)


def pct(host, *args, env: dict[str, str] | None = None):
    prefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
    return host.run([*prefix, PCT, *args])


# -- pct, the way gpunode and people call it ---------------------------------------------------------

def test_pct_exec_needs_double_dash_before_options(host_transport):
    r = pct(host_transport, "exec", "200", "ls", "-la")
    assert r.exit_code != 0
    assert "Unknown option: la" in r.stderr and "400 unable to parse option" in r.stderr
    r = pct(host_transport, "exec", "200", "--", "ls", "-la", "/mnt/lab")
    assert r.exit_code == 0 and "apt" in r.stdout


def test_pct_exec_missing_command(host_transport):
    r = pct(host_transport, "exec", "200")
    assert r.exit_code != 0 and r.stderr.startswith("missing command")


def test_pct_exec_exit_code_is_the_commands(host_transport):
    assert pct(host_transport, "exec", "200", "--", "sh", "-c", "exit 42").exit_code == 42


def test_pct_exec_keeps_the_host_env_unless_told_not_to(host_transport):
    env = {"GPUNODE_LEAK": "from-host", "SSL_CERT_FILE": "/host/ca.pem"}
    r = pct(host_transport, "exec", "200", "--", "sh", "-c", 'echo "$GPUNODE_LEAK|$SSL_CERT_FILE|$PATH"', env=env)
    assert r.stdout == "from-host||/sbin:/bin:/usr/sbin:/usr/bin\n"
    r = pct(host_transport, "exec", "200", "--keep-env", "0", "--", "sh", "-c", 'echo "[$GPUNODE_LEAK]"', env=env)
    assert r.stdout == "[]\n"


def test_pct_status_list_config(host_transport):
    assert pct(host_transport, "status", "200").stdout == "status: running\n"
    assert pct(host_transport, "status", "202").stdout == "status: stopped\n"
    r = pct(host_transport, "status", "999")
    assert r.exit_code != 0 and "Configuration file 'nodes/lab/lxc/999.conf' does not exist" in r.stderr
    rows = [line.split() for line in pct(host_transport, "list").stdout.splitlines()]
    assert rows[0] == ["VMID", "Status", "Lock", "Name"]
    assert ["200", "running", "lab-cpu"] in rows and ["202", "stopped", "lab-stopped"] in rows
    conf = dict(line.split(": ", 1) for line in pct(host_transport, "config", "201").stdout.splitlines())
    assert conf["hostname"] == "lab-gpu" and conf["memory"] == "12288" and conf["swap"] == "0"
    assert conf["mp0"] == f"{paths.SHARE_APT},mp={paths.CT_APT},ro=1"
    assert conf["dev0"] == "/dev/nvidia0"
    assert {"arch", "cores", "ostype", "rootfs"} <= conf.keys()


def test_pct_push_and_pull_stay_inside_the_container(host_transport, ct, tmp_path):
    tag = uuid.uuid4().hex[:8]
    src = f"/tmp/gpunode-push-{tag}"
    host_transport.write_file(src, b"pushed\x00bytes\n")
    try:
        r = pct(host_transport, "push", "200", src, f"/root/pushed-{tag}", "--perms", "600", "--user", "nobody")
        assert r.exit_code == 0, r.stderr
        assert ct.run(["stat", "-c", "%a %U", f"/root/pushed-{tag}"], check=True).stdout == "600 nobody\n"
        assert ct.read_file(f"/root/pushed-{tag}") == b"pushed\x00bytes\n"
        # A symlink in the container that points at a path which also exists on the host:
        # the write must land in the container's file, never the host's.
        ct.run(["sh", "-c", f"echo container > /tmp/target-{tag}; ln -sfn /tmp/target-{tag} /tmp/link-{tag}"],
               check=True)
        host_transport.write_file(f"/tmp/target-{tag}", b"host\n")
        assert pct(host_transport, "push", "200", src, f"/tmp/link-{tag}").exit_code == 0
        assert ct.read_file(f"/tmp/target-{tag}") == b"pushed\x00bytes\n"
        assert host_transport.read_file(f"/tmp/target-{tag}") == b"host\n"
        # pull
        r = pct(host_transport, "pull", "200", "/etc/hostname", f"/tmp/pulled-{tag}")
        assert r.exit_code == 0, r.stderr
        assert host_transport.read_file(f"/tmp/pulled-{tag}") == b"lab-cpu\n"
        r = pct(host_transport, "push", "202", src, "/root/x")
        assert r.exit_code != 0 and "can only push files to a running CT" in r.stderr
    finally:
        host_transport.run(["rm", "-f", src, f"/tmp/target-{tag}", f"/tmp/pulled-{tag}"])
        ct.run(["rm", "-f", f"/root/pushed-{tag}", f"/tmp/target-{tag}", f"/tmp/link-{tag}"])


# -- containers ----------------------------------------------------------------------------------------

def test_containers_run_systemd_without_network(ct):
    out = ct.script('cat /proc/1/comm; ls /sys/class/net; systemctl is-system-running || true', check=True).stdout
    lines = out.split()
    assert lines[0] == "systemd"
    assert [n for n in lines[1:-1]] == ["lo"]
    assert lines[-1] in ("running", "degraded", "starting")


def test_container_memory_limit_like_pve(ct):
    """PVE's layout (pve-container's lxc.cgroup.dir.container.inner = ns): the limit is enforced on
    the host's lxc/<vmid> cgroup, and the guest's own cgroup root shows none."""
    outer = containers.memory_limit_file(paths.CT_CPU)
    assert int(outer.read_text()) == 12288 * 1024 * 1024
    inner = ct.script("cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max",
                      check=True).stdout.strip()
    assert inner == "max" or int(inner) >= 1 << 62, inner


_IN_NAMESPACE = """
from gpunode_lab import containers
box = containers.Container(297, "cpu", "lab-cgroup-base", 512, True, 1, 0, containers.SHARES)
try:
    containers.remove(box); containers.ensure(box); containers.start(box)
    limit = containers.memory_limit_file(297)
    print(limit, limit.read_text().strip())
finally:
    containers.remove(box)
    containers.remove_cgroups()
"""


def test_the_memory_limit_is_found_where_lxc_made_it_when_pid_1_is_not_in_the_root_cgroup(tmp_path):
    """LXC makes its cgroups below PID 1's. Under a PID namespace (scripts/prove-fresh) or a job
    runner's init, PID 1 sits in a cgroup of its own: the limit file is there, not at the root."""
    if not Path("/sys/fs/cgroup/memory/cgroup.procs").exists():
        pytest.skip("no cgroup v1 memory hierarchy on this machine")
    own = Path(f"/sys/fs/cgroup/memory/gpunode-test-{os.getpid()}")
    own.mkdir()
    (tmp_path / "job.py").write_text(_IN_NAMESPACE)
    try:
        done = subprocess.run(["sh", "-c", f'echo $$ > {own}/cgroup.procs && exec unshare --pid --fork --mount '
                               f'--propagation private sh -c "mount -t proc proc /proc && exec {sys.executable} '
                               f'{tmp_path}/job.py"'], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        path, limit = done.stdout.split()
        assert path.startswith(f"{own}/gpunode-lab-") and int(limit) == 512 * 1024 * 1024, done.stdout
    finally:
        # The job and its container are gone; LXC leaves an empty lxc.pivot, remove_cgroups the rest.
        for folder, _, _ in sorted(os.walk(own), key=lambda w: -len(w[0])):
            os.rmdir(folder)


def test_shares_are_mounted_read_only(ct):
    for target in (paths.CT_APT, paths.CT_WHEELS, paths.CT_MODELS):
        r = ct.run(["touch", f"{target}/gpunode-write-test"])
        assert r.exit_code != 0 and "Read-only file system" in r.stderr


def test_base_has_python_but_not_what_roles_install(ct, host_transport):
    assert ct.run(["python3", "-c", "print(1)"], check=True).stdout == "1\n"
    # Asked of the base rootfs itself: roles may already have installed things in 200.
    admindir = f"{paths.BASE_ROOTFS}/var/lib/dpkg"
    state = host_transport.script(
        r'for p in python3 systemd python3-venv hello; do dpkg-query --admindir="$1" -W -f="\${Status}" "$p" '
        '2>/dev/null | grep -q "install ok installed" && echo "$p installed" || echo "$p absent"; done',
        admindir).stdout
    assert state.splitlines() == ["python3 installed", "systemd installed", "python3-venv absent", "hello absent"]


def test_apt_works_offline_from_the_local_repository(host_transport):
    gpu = PctTransport(host_transport, paths.CT_GPU, pct=PCT, host_name="lab")
    assert "file:/mnt/lab/apt" in gpu.run(["cat", "/etc/apt/sources.list.d/gpunode-lab.list"], check=True).stdout
    gpu.run(["apt-get", "update", "-q"], check=True, timeout=120)
    # --reinstall: other tests may have installed some of these in 201 already.
    sim = gpu.run(["apt-get", "install", "-s", "-y", "--reinstall", "hello", "python3-venv", "python3-pip", "libnuma1",
                   "ca-certificates", "curl", "jq"], check=True)
    assert "Inst python3-venv" in sim.stdout and "Inst hello" in sim.stdout
    try:
        gpu.run(["apt-get", "install", "-y", "-q", "hello"], check=True, timeout=120)
        assert gpu.run(["hello"], check=True).stdout == "Hello, world!\n"
    finally:
        gpu.run(["apt-get", "purge", "-y", "-q", "hello"], timeout=120)


def test_nvidia_smi_stand_in_in_the_gpu_container(host_transport, lab):
    gpu = PctTransport(host_transport, paths.CT_GPU, pct=PCT, host_name="lab")
    head = gpu.run(["head", "-3", "/usr/bin/nvidia-smi"], check=True).stdout
    assert "STAND-IN" in head and "REPLAYS" in head
    r = gpu.run(["nvidia-smi"])
    if lab["gpu_recording"]:
        assert r.exit_code == 0 and "NVIDIA-SMI" in r.stdout
        bad = gpu.run(["nvidia-smi", "--query-gpu=gpunode.nonsense", "--format=csv"])
        assert bad.exit_code != 0 and "Invalid combination" in bad.stderr
    else:
        assert r.exit_code != 0 and "no nvidia-smi recording is mounted" in r.stderr
    assert PctTransport(host_transport, 200, pct=PCT).run(["sh", "-c", "command -v nvidia-smi"]).exit_code != 0


def _tree_state(root):
    """Each file's mtime and size under root: what a rebuild or a re-download would change."""
    return {str(f): (f.stat().st_mtime_ns, f.stat().st_size) for f in root.rglob("*") if f.is_file()}


@pytest.mark.skipif(os.geteuid() != 0, reason="lab.up needs root")
def test_up_again_is_a_no_op(lab):
    # What makes a re-run cheap is that it restarts nothing and rewrites nothing; how long it
    # takes is bench's business (a timed assertion here failed on a loaded CI machine).
    import gpunode_lab as labmod
    from gpunode_lab import containers

    cts = [ct for ct in containers.lab_containers() if containers.state(ct) == "running"]
    pids = {ct.name: containers.init_pid(ct) for ct in cts}
    shared = [paths.SHARE_APT, paths.SHARE_WHEELS]
    before = {str(d): _tree_state(d) for d in shared}
    lines: list[str] = []
    st = labmod.up(lab["gpu_shape"] or paths.DEFAULT_GPU_SHAPE, progress=lines.append)
    assert st["up"]
    assert not any("started" in line or "created" in line or "restarting" in line for line in lines), lines
    assert st["sshd"]["pid"] == lab["sshd"]["pid"]
    assert {ct.name: containers.init_pid(ct) for ct in cts} == pids, "a running container was restarted"
    assert {str(d): _tree_state(d) for d in shared} == before, "the apt repository or wheelhouse was rewritten"
