"""The facts probe reads files with shell builtins where the commands it replaced started a
process each: run for real with sh on this machine, each section must say what those commands say."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpunode.facts import cuda, system
from gpunode.facts.probe import script, split


def probe(*names: str, venv_root: str = "/opt/gpunode/venvs") -> dict[str, str]:
    from gpunode.facts.probe import _snippets

    chosen = [s for s in _snippets() if s.name in names]
    out = subprocess.run(["sh", "-c", script(chosen), "sh", "N0NCE", "", "", venv_root],
                         capture_output=True, text=True, check=True, env={"PATH": os.environ["PATH"]}).stdout
    sections = split(out, "N0NCE")
    assert set(sections) == set(names)
    return {k: v.output for k, v in sections.items()}


def run(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()


def test_host_section_says_what_uname_and_id_say():
    host = system.keyvals(probe("host")["host"])
    assert host["uname"] == run("uname", "-srm")
    assert host["hostname"] == run("cat", "/proc/sys/kernel/hostname")
    assert host["uid"] == run("id", "-u")


def test_cpus_and_meminfo_say_what_nproc_and_grep_say():
    out = probe("cpus", "meminfo")
    assert system.parse_cpus(out["cpus"]) == int(run("nproc"))
    wanted = subprocess.run(["grep", "-E", "^(MemTotal|MemAvailable):", "/proc/meminfo"], capture_output=True,
                            text=True).stdout
    assert [line.split(":")[0] for line in out["meminfo"].splitlines()] == \
        [line.split(":")[0] for line in wanted.splitlines()]
    assert system.parse_meminfo(out["meminfo"]) == system.parse_meminfo(wanted)


def test_os_release_is_the_file_itself():
    with open("/etc/os-release") as f:
        assert probe("os_release")["os_release"].rstrip("\n") == f.read().rstrip("\n")


@pytest.mark.skipif(not shutil.which("python3"), reason="needs python3 on PATH")
def test_default_python_version_without_running_it():
    _, default = system.parse_pythons(probe("pythons")["pythons"])
    assert default == run("python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])")


def test_one_df_serves_shm_and_disk_and_a_missing_venv_root_walks_up(tmp_path):
    out = probe("shm", "disk", venv_root=str(tmp_path / "no" / "such" / "venvs"))
    assert system.keyvals(out["disk"])["path"] == str(tmp_path)
    assert system.parse_df(out["shm"])[0] == system.parse_df(run("df", "-Pk", "/dev/shm"))[0]
    assert system.parse_df(out["disk"])[0] == system.parse_df(run("df", "-Pk", str(tmp_path)))[0]


def test_memlimit_walks_the_cgroup_of_the_probe():
    out = probe("memlimit")["memlimit"]
    with open("/proc/self/cgroup") as f:
        v2 = [line.split("::", 1)[1].strip() for line in f if line.startswith("0::")]
    if v2 and os.path.exists(f"/sys/fs/cgroup{v2[0].rstrip('/')}/memory.max"):
        assert out.startswith("v2 ")
    assert all(line.split()[0] in ("v1", "v2") for line in out.splitlines())


def test_libs_links_come_from_one_stat(tmp_path):
    (tmp_path / "libcuda.so.580.65.06").write_text("")
    (tmp_path / "libcuda.so.1").symlink_to("libcuda.so.580.65.06")
    body = next(s.body for s in cuda.SNIPPETS if s.name == "libs").replace(cuda.LIB_DIRS[0], str(tmp_path))
    out = subprocess.run(["sh", "-c", body], capture_output=True, text=True, check=True).stdout
    assert f"file: {tmp_path}/libcuda.so.1 -> libcuda.so.580.65.06" in out.splitlines()
    libs = cuda.parse_libs(out)
    assert libs.libcuda and libs.libcuda_version == "580.65.06"
    # coreutils before 8.26 quotes both names of %N
    assert cuda.parse_libs("file: '/x/libcuda.so.1' -> 'libcuda.so.580.65.06'\n").libcuda_version == "580.65.06"


def test_container_section_says_what_systemd_and_pid1_say():
    in_container, systemd = system.parse_container(probe("container")["container"])
    kinds = set()
    if os.path.exists("/run/systemd/container"):
        kinds.add(Path("/run/systemd/container").read_text().strip())
    if shutil.which("systemd-detect-virt"):
        kinds.add(subprocess.run(["systemd-detect-virt", "-c"], capture_output=True, text=True).stdout.strip())
    try:
        env = Path("/proc/1/environ").read_bytes().split(b"\0")
        kinds |= {e[len(b"container="):].decode() for e in env if e.startswith(b"container=")}
    except PermissionError:
        pass
    assert in_container == bool(kinds - {"", "none"})
    assert systemd == os.path.isdir("/run/systemd/system")
