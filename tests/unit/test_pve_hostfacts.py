"""Host facts and classic passthrough lines from recorded outputs (tests/data/pve/HOSTFACTS.md)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpunode import shell
from gpunode.errors import PveError
from gpunode.pve import classic, devices, hostfacts

DATA = Path(__file__).parents[1] / "data" / "pve"


def read(rel: str) -> str:
    return (DATA / rel).read_text()


def h200() -> hostfacts.HostFacts:
    return hostfacts.parse(read("hostfacts/h200-nixos-580.out"))


def test_h200_probe_output():
    f = h200()
    assert f.driver == "580.159.04" and f.kernel == "6.18.44-fc-v973-gpu"
    assert f.pve is None and f.pveversion is None  # not a Proxmox host
    assert f.majors["nvidia"] == 195 and f.majors["nvidia-uvm"] == 238 and f.majors["nvidia-caps"] == 241
    assert f.uvm and "/dev/nvidia0" in f.nodes and "/dev/nvidia-caps/nvidia-cap2" in f.nodes
    assert f.install == "unknown"  # a Nix-built module: neither .run markers nor packages
    shown = "\n".join(f.lines())
    assert "NVIDIA driver 580.159.04" in shown and "GPUs [0]" in shown and "/dev/nvidia-uvm yes" in shown


@pytest.mark.parametrize(("name", "version", "devn"), [
    ("pve7.4-14.txt", (7, 4, 14), False), ("pve8.0.3.txt", (8, 0, 3), False), ("pve9.1.9.txt", (9, 1, 9), True)])
def test_pveversion_decides_devn_or_classic(name, version, devn):
    text = read(f"pveversion/{name}")
    assert hostfacts.parse_pveversion(text) == version
    facts = hostfacts.parse(f"@pveversion\n{text}@kernel\n6.8.12-4-pve\n")
    assert facts.devn is devn
    assert ("devN entries" in facts.lines()[2]) is devn


def test_proc_devices_old_and_new_main_names():
    old = hostfacts.parse_proc_devices(read("proc-devices/ocp-efa-p4d.txt"))
    new = hostfacts.parse_proc_devices(read("proc-devices/h200-nixos-580.txt"))
    assert old["nvidia-frontend"] == 195 and old["nvidia-uvm"] == 510 and "nvidia" not in old
    assert new["nvidia"] == 195 and new["nvidia-uvm"] == 238
    assert "virtblk" not in new and "zram" not in new  # block devices are not character majors
    assert hostfacts.parse_proc_devices("Block devices:\n254 virtblk\n") == {}


def test_packages_carry_the_driver_version():
    text = "@driver\nNVRM version: NVIDIA UNIX x86_64 Kernel Module  595.58.03  Release Build\n@packages\n" + read(
        "dpkg/debian-cuda-repo-595.txt")
    f = hostfacts.parse(text)
    assert f.install == "packages"
    assert {p.name for p in f.driver_packages} >= {"nvidia-driver", "nvidia-kernel-dkms", "nvidia-driver-libs"}
    assert hostfacts.Package("nvidia-driver", "1:535.183.01-1~deb12u1").upstream == "535.183.01"
    # An upgrade whose module is not loaded yet: the packages are 595, the running module is not.
    stale = hostfacts.parse(text.replace("595.58.03  Release", "590.48.01  Release"))
    assert stale.install == "unknown" and stale.driver_packages == ()


def test_run_installer_markers():
    f = hostfacts.parse("@driver\nNVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release\n"
                        "@run_markers\n/usr/bin/nvidia-uninstall\n/var/log/nvidia-installer.log\n")
    assert f.install == "run" and "NVIDIA .run installer" in f.lines()[1]


def test_missing_uvm_offers_modprobe_and_a_udev_rule():
    text = read("hostfacts/h200-nixos-580.out")
    text = "\n".join(line for line in text.splitlines() if "nvidia-uvm" not in line)
    shown = "\n".join(hostfacts.parse(text).lines())
    assert "/dev/nvidia-uvm MISSING" in shown and "nvidia-modprobe -u -c=0" in shown and "udev" in shown


def test_the_probe_runs_under_sh_and_prefixes_a_root(tmp_path):
    (tmp_path / "dev").mkdir()
    (tmp_path / "proc" / "driver" / "nvidia").mkdir(parents=True)
    (tmp_path / "proc" / "driver" / "nvidia" / "version").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build\n")
    (tmp_path / "proc" / "devices").write_text("Character devices:\n195 nvidia\n509 nvidia-uvm\n")
    (tmp_path / "usr" / "bin").mkdir(parents=True)
    (tmp_path / "usr" / "bin" / "nvidia-uninstall").write_text("")
    out = subprocess.run(shell.sh(hostfacts.PROBE, *hostfacts.probe_args(str(tmp_path))), capture_output=True,
                         text=True, check=True)
    f = hostfacts.parse(out.stdout, str(tmp_path))
    assert f.driver == "580.65.06" and f.majors == {"nvidia": 195, "nvidia-uvm": 509}
    assert f.run_markers == ("/usr/bin/nvidia-uninstall",) and f.install == "run" and f.nodes == ()


def test_classic_lines_take_majors_from_proc_devices():
    f = h200()
    paths = devices.passthrough(f.nodes, [0])
    lines = classic.lines(f, paths)
    assert lines[:3] == ["lxc.cgroup2.devices.allow: c 195:* rwm", "lxc.cgroup2.devices.allow: c 238:* rwm",
                         "lxc.cgroup2.devices.allow: c 241:* rwm"]
    assert "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file" in lines
    assert "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file" in lines
    assert lines[-1] == "lxc.mount.entry: /dev/nvidia-caps dev/nvidia-caps none bind,optional,create=dir"
    other = hostfacts.HostFacts(majors=hostfacts.parse_proc_devices(read("proc-devices/ocp-efa-p4d.txt")),
                                pve=(6, 4, 15))
    assert classic.lines(other, ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"])[:2] == [
        "lxc.cgroup.devices.allow: c 195:* rwm", "lxc.cgroup.devices.allow: c 510:* rwm"]


def test_classic_without_uvm_major_is_a_clear_error():
    f = hostfacts.HostFacts(majors={"nvidia": 195})
    with pytest.raises(PveError) as err:
        classic.lines(f, ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"], host="kpro6")
    assert "nvidia-uvm is not in /proc/devices on host kpro6" in err.value.message
    assert "nvidia-modprobe -u -c=0" in err.value.hint


def test_merge_adds_missing_lines_drops_stale_majors_and_keeps_snapshots():
    f = h200()
    wanted = classic.lines(f, ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"])
    conf = ("arch: amd64\nhostname: gpu\nmemory: 65536\n"
            "lxc.cgroup2.devices.allow: c 195:* rwm\n"
            "lxc.cgroup2.devices.allow: c 509:* rwm\n"      # nvidia-uvm's major of an earlier boot
            "lxc.cgroup2.devices.allow: c 10:200 rwm\n"     # /dev/net/tun: not ours, stays
            "lxc.mount.entry: /dev/nvidia1 dev/nvidia1 none bind,optional,create=file\n"
            "\n[before-upgrade]\narch: amd64\nmemory: 65536\n")
    m = classic.merge(conf, wanted, f)
    assert m.removed == ("lxc.cgroup2.devices.allow: c 509:* rwm",
                         "lxc.mount.entry: /dev/nvidia1 dev/nvidia1 none bind,optional,create=file")
    assert "lxc.cgroup2.devices.allow: c 238:* rwm" in m.added
    assert "lxc.cgroup2.devices.allow: c 195:* rwm" not in m.added
    assert "c 10:200 rwm" in m.text and m.text.endswith("\n\n[before-upgrade]\narch: amd64\nmemory: 65536\n")
    again = classic.merge(m.text, wanted, f)
    assert not again.changed and again.text == m.text


def test_host_driver_absent_is_refused_with_what_to_do():
    from gpunode.pve import gpuhost

    bare = hostfacts.parse("@kernel\n6.8.12-4-pve\n@ls\n" + read("ls-dev-nvidia/debian12-no-driver.txt"))
    with pytest.raises(PveError) as err:
        gpuhost.plan(bare, [0, 1], "kpro6")
    assert err.value.message.startswith("the NVIDIA driver is absent on host kpro6 (no /proc/driver/nvidia/version)")
    assert "/dev/nvidia0, /dev/nvidia1 do not exist on host kpro6" in err.value.message
    assert "install the driver on the Proxmox host" in err.value.hint
    stale = hostfacts.parse("\n".join(line for line in read("hostfacts/h200-nixos-580.out").splitlines()
                                      if not line.startswith(("NVRM", "GCC"))))
    with pytest.raises(PveError, match="stale nodes of an unloaded module"):
        gpuhost.plan(stale, [0], "kpro6")


def test_gpu_plan_devn_or_classic_by_version():
    from gpunode.pve import gpuhost

    text = read("hostfacts/h200-nixos-580.out")
    new = gpuhost.plan(hostfacts.parse(text.replace("@pveversion\n", "@pveversion\n" + read(
        "pveversion/pve9.1.9.txt"))), [0], "h")
    assert new.devn[:3] == ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"] and new.classic == []
    old = gpuhost.plan(hostfacts.parse(text.replace("@pveversion\n", "@pveversion\n" + read(
        "pveversion/pve8.0.3.txt"))), [0], "h")
    assert old.devn == [] and "lxc.cgroup2.devices.allow: c 238:* rwm" in old.classic
    assert "classic passthrough lines for the CT config:" in old.lines()


def test_userspace_plan_lines():
    from gpunode.pve import userspace

    f = hostfacts.parse("@driver\nNVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release\n"
                        "@run_markers\n/usr/bin/nvidia-uninstall\n")
    url = userspace.DEFAULT_URL
    assert userspace.plan_lines(f, userspace.State("580.65.06", True), url) == [
        "driver user-space in the CT: 580.65.06 (matches the host)"]
    line = userspace.plan_lines(f, userspace.State("575.57.08", True), url)[0]
    assert line.startswith("driver user-space in the CT: 575.57.08 -> 580.65.06, by NVIDIA .run")
    assert "https://us.download.nvidia.com/XFree86/Linux-x86_64/580.65.06/NVIDIA-Linux-x86_64-580.65.06.run" in line
    pk = hostfacts.parse("@driver\nNVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Release\n@packages\n"
                         "ii  nvidia-kernel-dkms  535.183.01-1~deb12u1  amd64  x\n"
                         "ii  libcuda1:amd64  535.183.01-1~deb12u1  amd64  x\n")
    assert userspace.plan_lines(pk, None, url) == [
        "driver user-space in the CT: not installed -> 535.183.01, by apt: libcuda1=535.183.01-1~deb12u1"]
