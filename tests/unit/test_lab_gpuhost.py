"""The lab's stand-in GPU host without the lab: the installed nvidia-smi's version behaviour and
the stand-in .run's options (the whole install runs for real in tests/lab/test_onboard_driver_lab.py)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from gpunode import shell
from gpunode.facts import gpu
from gpunode_lab import gpuhost, nvidia_smi_standin

SHAPE = Path(__file__).parents[1] / "data" / "nvidia-smi" / "rtx-pro-6000-x8"


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """nvidia-smi as the stand-in installer leaves it: version 600.10.01, GPUs 0 and 1 passed in."""
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl"):
        (dev / name).touch()
    proc = tmp_path / "version"
    proc.write_text(gpuhost.proc_version("600.10.01"))
    for k, v in {"SHAPE_DIR": str(SHAPE), "INSTALLED_VERSION": "600.10.01", "PROC_VERSION": str(proc),
                 "DEV": str(dev)}.items():
        monkeypatch.setattr(nvidia_smi_standin, k, v)
    return proc


def run(capsysbinary, *argv):
    code = nvidia_smi_standin.main(list(argv))
    out, err = capsysbinary.readouterr()
    return code, out.decode(), err.decode()


def test_installed_copy_reports_its_version_and_only_the_gpus_passed_in(installed, capsysbinary):
    code, out, _ = run(capsysbinary, *gpu.QUERY_ARGS)
    assert code == 0
    view = gpu.parse_query(out)
    assert [g.index for g in view.gpus] == [0, 1] and view.driver == "600.10.01"
    code, table, _ = run(capsysbinary)
    assert code == 0 and "Driver Version: 600.10.01" in table and "590.48.01" not in table


def test_installed_copy_refuses_another_kernel_module(installed, capsysbinary):
    installed.write_text(gpuhost.proc_version("610.20.02"))
    code, out, _ = run(capsysbinary, *gpu.QUERY_ARGS)
    assert code == 18
    assert out == "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 600.10\n"


def test_installed_copy_without_the_module_cannot_talk_to_the_driver(installed, capsysbinary):
    installed.unlink()
    code, _, err = run(capsysbinary)
    assert code == 9 and "couldn't communicate with the NVIDIA driver" in err


def test_the_lab_copy_is_unchanged(capsysbinary, monkeypatch):
    monkeypatch.setattr(nvidia_smi_standin, "SHAPE_DIR", str(SHAPE))
    code, out, _ = run(capsysbinary, *gpu.QUERY_ARGS)
    assert code == 0 and out == (SHAPE / "query-gpu.csv").read_text()  # all 8, the recorded version


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs sh")
def test_stand_in_run_needs_no_kernel_module_and_knows_its_options(tmp_path):
    f = tmp_path / "NVIDIA-Linux-x86_64-600.10.01.run"
    f.write_text(gpuhost.installer_text("600.10.01"))
    no_flag = subprocess.run(["sh", str(f), "--silent"], capture_output=True, text=True)
    assert no_flag.returncode == 1 and "--no-kernel-module" in no_flag.stderr
    bad = subprocess.run(["sh", str(f), "--frobnicate"], capture_output=True, text=True)
    assert bad.returncode == 1 and "Unrecognized option: '--frobnicate'" in bad.stderr
    version = subprocess.run(["sh", str(f), "--version"], capture_output=True, text=True)
    assert "600.10.01" in version.stdout
    assert 'INSTALLED_VERSION = "600.10.01"' in f.read_text()


def test_api_stand_in_keeps_raw_lxc_lines_and_binds_stand_in_nodes(tmp_path, monkeypatch):
    from gpunode_lab import paths, pve_api

    monkeypatch.setattr(paths, "PVE_LXC", tmp_path)
    text = (f"arch: amd64\nhostname: gpu\nmemory: 2048\nlxc.cgroup2.devices.allow: c 195:* rwm\n"
            f"lxc.cgroup2.devices.allow: c 509:* rwm\n"
            f"lxc.mount.entry: {gpuhost.ROOT}/dev/nvidia1 dev/nvidia1 none bind,optional,create=file\n")
    (tmp_path / "277.conf").write_text(text)
    conf, _ = pve_api.read_conf("277")
    assert pve_api.render_conf(conf) == text  # both allow lines, in order, after the other keys
    ct = pve_api.lab_container("277", conf)
    assert [(str(m.host), m.target, m.kind) for m in ct.mounts][:2] == [
        (f"{gpuhost.ROOT}/dev/nvidia1", "/dev/nvidia1", "file"), (f"{gpuhost.ROOT}/proc/driver", "/proc/driver", "dir")]
    plain = {"hostname": "cpu", "memory": "1024", "dev0": "/dev/null"}
    assert pve_api.lab_container("278", plain).mounts == ()  # other devN stay records only


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of character devices needs root (as `inv lab.up` runs)")
def test_ensure_makes_the_stand_in_host_that_the_onboard_probe_reads(tmp_path, monkeypatch):
    from gpunode.pve import hostfacts

    monkeypatch.setattr(gpuhost, "ROOT", tmp_path / "gpuhost")
    monkeypatch.setattr(gpuhost, "DOWNLOADS", tmp_path / "gpuhost" / "downloads")
    root = gpuhost.ensure(gpus=2)
    again = gpuhost.ensure(gpus=2)  # what a second `inv lab.up` does: nothing new
    assert again == root and gpuhost.driver() == gpuhost.DEFAULT_VERSION
    probe = shell.sh(hostfacts.PROBE, *hostfacts.probe_args(str(root)))
    out = subprocess.run(probe, capture_output=True, text=True, check=True)
    f = hostfacts.parse(out.stdout, str(root))
    assert f.pve == (8, 2, 4) and f.devn and f.install == "run" and f.driver == gpuhost.DEFAULT_VERSION
    assert f.majors == {"mem": 1, "nvidia": 195, "nvidiactl": 195, "nvidia-uvm": gpuhost.UVM_MAJOR}
    assert sorted(f.nodes) == ["/dev/nvidia-modeset", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia0",
                               "/dev/nvidia1", "/dev/nvidiactl"]
    st = (root / "dev" / "nvidia1").stat()
    assert stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 195 and os.minor(st.st_rdev) == 1
    gpuhost.set_driver("595.58.03")
    assert gpuhost.ensure(gpus=2) and gpuhost.driver() == "595.58.03"  # ensure keeps an upgrade
    assert (gpuhost.DOWNLOADS / "NVIDIA-Linux-x86_64-595.58.03.run").stat().st_mode & 0o111
    if shutil.which("dpkg-deb") and shutil.which("dpkg-scanpackages"):
        monkeypatch.setattr(gpuhost, "APT", root / "apt")
        gpuhost.set_install("packages")
        out = subprocess.run(probe, capture_output=True, text=True, check=True)
        f = hostfacts.parse(out.stdout, str(root))
        assert f.install == "packages" and not f.run_markers
        assert {p.name for p in f.driver_packages} == set(gpuhost.HOST_PACKAGES)
        assert "Package: nvidia-smi\nVersion: 595.58.03-1\n" in (root / "apt" / "Packages").read_text()
        gpuhost.set_install("run")
        assert gpuhost.install_kind() == "run" and (root / "usr" / "bin" / "nvidia-uninstall").exists()
