"""The lab's stand-ins without the lab: pct's argument handling and messages, nvidia-smi replay,
and the container configs. (The same programs run for real in tests/lab.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode_lab import containers, nvidia_smi_standin, paths, pct_transfer
from gpunode_lab import pct_standin as pct


class Execd(Exception):
    def __init__(self, argv):
        self.argv = argv


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A fake node: 200 exists and runs, 202 exists and is stopped."""
    conf_dir = tmp_path / "lxc"
    conf_dir.mkdir()
    ct200 = containers.lab_containers()[0]
    (conf_dir / "200.conf").write_text(containers.pve_config(ct200))
    (conf_dir / "202.conf").write_text("hostname: lab-stopped\nmemory: 2048\n")
    monkeypatch.setattr(pct, "PVE_LXC", str(conf_dir))
    monkeypatch.setattr(pct, "active_containers", lambda: {"200"})

    def fake_exec(file, argv):
        raise Execd(argv)

    monkeypatch.setattr(pct.os, "execvp", fake_exec)
    return conf_dir


def run(capsys, *argv):
    code = pct.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_constants_match_the_lab_paths():
    assert str(paths.LXC_PATH) == pct.LXC_PATH
    assert str(paths.PVE_LXC) == pct.PVE_LXC
    assert pct.NODE == paths.NODE
    assert str(paths.RUN) == pct.LOCK_DIR


def test_exec_without_double_dash_fails_like_getopt(node, capsys):
    code, out, err = run(capsys, "exec", "200", "ls", "-la")
    assert code != 0
    assert err == "Unknown option: la\n400 unable to parse option\npct exec <vmid> [<extra-args>] [OPTIONS]\n"


def test_exec_plain_words_without_double_dash_are_accepted_like_real_pct(node, capsys):
    with pytest.raises(Execd) as ex:
        pct.main(["exec", "200", "ls"])
    assert ex.value.argv[-2:] == ["--", "ls"]


def test_exec_runs_lxc_attach_keeping_env_by_default(node, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", "/x")
    monkeypatch.setenv("PATH", "/somewhere")
    with pytest.raises(Execd) as ex:
        pct.main(["exec", "200", "--", "ls", "-la", "--keep-env", "0"])
    assert ex.value.argv == ["lxc-attach", "-P", pct.LXC_PATH, "-n", "200", "--keep-env", "--",
                             "ls", "-la", "--keep-env", "0"]
    import os

    assert "SSL_CERT_FILE" not in os.environ
    assert os.environ["PATH"] == "/sbin:/bin:/usr/sbin:/usr/bin"


@pytest.mark.parametrize("flag", [["--keep-env", "0"], ["--keep-env=0"], ["-keep-env", "false"]])
def test_exec_keep_env_0_clears_it(node, flag):
    with pytest.raises(Execd) as ex:
        pct.main(["exec", "200", *flag, "--", "true"])
    assert "--clear-env" in ex.value.argv and "--keep-env" not in ex.value.argv


def test_exec_checks_existence_then_running_then_command(node, capsys):
    assert run(capsys, "exec", "999", "--", "true")[2] == "Configuration file 'nodes/lab/lxc/999.conf' does not exist\n"
    assert run(capsys, "exec", "202", "--", "true")[2] == "container '202' not running!\n"
    assert run(capsys, "exec", "202")[2] == "container '202' not running!\n"
    code, _, err = run(capsys, "exec", "200")
    assert code != 0 and err.startswith("missing command")
    code, _, err = run(capsys, "exec", "200", "--")
    assert code != 0 and err.startswith("missing command")


def test_bad_vmid_and_missing_vmid(node, capsys):
    code, _, err = run(capsys, "exec", "abc", "--", "true")
    assert code != 0 and "value does not look like a valid VMID" in err
    code, _, err = run(capsys, "exec")
    assert code != 0 and err.startswith("400 not enough arguments")


def test_status_list_config(node, capsys):
    assert run(capsys, "status", "200") == (0, "status: running\n", "")
    assert run(capsys, "status", "202") == (0, "status: stopped\n", "")
    code, out, _ = run(capsys, "list")
    assert out.splitlines() == [
        "VMID       Status     Lock         Name                ",
        "200        running                 lab-cpu             ",
        "202        stopped                 lab-stopped         ",
    ]
    code, out, _ = run(capsys, "config", "200")
    keys = [line.split(":")[0] for line in out.splitlines()]
    assert keys == sorted(keys)
    assert "memory: 12288" in out and f"mp0: {paths.SHARE_APT},mp={paths.CT_APT},ro=1" in out


def test_unknown_and_unimplemented_commands(capsys):
    code, _, err = run(capsys, "frobnicate")
    assert code != 0 and "unknown command 'pct frobnicate'" in err
    code, _, err = run(capsys, "snapshot", "200", "x")
    assert code != 0 and "does not implement" in err
    code, _, err = run(capsys)
    assert code != 0 and "no command specified" in err


def test_push_perms_parse_like_pct():
    assert pct_transfer.parse_perms("644") == 0o644
    assert pct_transfer.parse_perms("0755") == 0o755
    assert pct_transfer.parse_perms("0x1ff") == 0o777
    with pytest.raises(pct.Die, match="invalid mode"):
        pct_transfer.parse_perms("rw")


# -- nvidia-smi replay ----------------------------------------------------------------------------

def shape(tmp_path: Path) -> Path:
    d = tmp_path / "shape"
    d.mkdir()
    (d / "nvidia-smi.txt").write_text("TABLE\n")
    (d / "nvidia-smi-q.txt").write_text("Q\n")
    (d / "query-gpu.args").write_text("--query-gpu=index,name\n--format=csv,noheader\n")
    (d / "query-gpu.csv").write_text("0, NVIDIA X\n")
    (d / ".lab-shape").write_text("x-x1\n")
    return d


def smi(monkeypatch, capsysbinary, folder, *argv):
    monkeypatch.setattr(nvidia_smi_standin, "SHAPE_DIR", str(folder))
    code = nvidia_smi_standin.main(list(argv))
    out, err = capsysbinary.readouterr()
    return code, out, err.decode()


def test_nvidia_smi_replays_recordings(tmp_path, monkeypatch, capsysbinary):
    d = shape(tmp_path)
    assert smi(monkeypatch, capsysbinary, d) == (0, b"TABLE\n", "")
    assert smi(monkeypatch, capsysbinary, d, "-q") == (0, b"Q\n", "")
    assert smi(monkeypatch, capsysbinary, d, "--query-gpu=index,name", "--format=csv,noheader") == (
        0, b"0, NVIDIA X\n", "")
    (d / "query-gpu.args").write_text("--query-gpu=index,name --format=csv,noheader\n")
    assert smi(monkeypatch, capsysbinary, d, "--query-gpu=index,name", "--format=csv,noheader")[0] == 0


def test_nvidia_smi_fails_for_what_was_not_recorded(tmp_path, monkeypatch, capsysbinary):
    d = shape(tmp_path)
    code, out, err = smi(monkeypatch, capsysbinary, d, "--query-gpu=power.draw", "--format=csv")
    assert code == 2 and out == b""
    assert "Invalid combination of input arguments" in err and "x-x1" in err
    code, out, err = smi(monkeypatch, capsysbinary, tmp_path / "nothing")
    assert code == 9 and "no nvidia-smi recording is mounted" in err


def test_recorded_shapes_in_the_repo_replay(monkeypatch, capsysbinary):
    root = Path(__file__).resolve().parents[1] / "data" / "nvidia-smi"
    shapes = [d for d in root.iterdir() if (d / "nvidia-smi.txt").exists()] if root.exists() else []
    for d in shapes:
        code, out, _ = smi(monkeypatch, capsysbinary, d)
        assert code == 0 and out == (d / "nvidia-smi.txt").read_bytes()
        if (d / "query-gpu.args").exists():
            args = (d / "query-gpu.args").read_text().split()
            code, out, _ = smi(monkeypatch, capsysbinary, d, *args)
            assert code == 0 and out == (d / "query-gpu.csv").read_bytes()


# -- configs ----------------------------------------------------------------------------------------

def test_configs_of_the_three_containers():
    cpu, gpu, stopped = containers.lab_containers(gpus=8)
    assert (cpu.vmid, cpu.running, gpu.vmid, gpu.running, stopped.vmid, stopped.running) == (
        200, True, 201, True, 202, False)
    conf = containers.pve_config(gpu)
    assert "dev0: /dev/nvidia0\n" in conf and "dev7: /dev/nvidia7\n" in conf and "/dev/nvidiactl" in conf
    assert f"mp3: {paths.SHARE_NVIDIA_SMI},mp={paths.CT_NVIDIA_SMI},ro=1\n" in conf
    assert "dev0" not in containers.pve_config(cpu)
    lxc = containers.lxc_config(cpu, "overlay")
    assert "lxc.net.0.type = empty" in lxc
    assert f"lxc.mount.entry = {paths.SHARE_APT} mnt/lab/apt none bind,ro,create=dir 0 0" in lxc
    assert f"= {12 * 1024 ** 3}" in lxc  # 12 GiB, like PVE's memory: 12288


def test_a_container_with_an_address_is_on_the_lab_bridge_only():
    ct = containers.Container(221, "cpu", "fleet-a", 3072, True, 2, 0, containers.SHARES, "10.231.0.21")
    lxc = containers.lxc_config(ct, "overlay")
    assert "lxc.net.0.type = veth\nlxc.net.0.link = gnlab0\n" in lxc
    assert "lxc.net.0.ipv4.address = 10.231.0.21/24\n" in lxc
    assert "ipv4.gateway" not in lxc  # no route out of the lab network


def test_an_unknown_gpu_shape_is_refused_before_anything_happens():
    from gpunode_lab import LabError, node

    with pytest.raises(LabError, match="no recorded nvidia-smi shape named 'no-such-shape'") as err:
        node.up(gpu_shape="no-such-shape")
    assert "known shapes:" in err.value.hint


def test_invoke_collection_has_the_lab_tasks():
    from gpunode_lab.tasks import ns

    assert {"up", "down", "status", "destroy"} <= set(ns.task_names)
