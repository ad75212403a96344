"""The container audit on real configs (tests/data/lxc-configs/README.md names each one's thread).

Several records end where the stored copy of the post ended. A finding about something absent
(line None) on such a record is what the audit says about the recorded text, not a claim about
the poster's whole file; the table marks those rows "(cut)".
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from gpunode.pve import audit, lxcconf

DATA = Path(__file__).resolve().parents[1] / "data" / "lxc-configs"
GIB = 1 << 30

# file -> the (finding id, line) pairs the audit must report, without a model size.
EXPECTED = {
    "clean-devn-onboard.conf": set(),
    "i915sriov-308-110-devn.conf": set(),  # a real devN config (Intel) with a mount point: nothing to say
    "community-scripts-8605-103.conf": {("devices-allow-all", 13), ("cap-drop-empty", 14), ("privileged", None)},
    "frigate-4136-fragment.conf": {("dynamic-major", 2)},
    # (cut) the post goes on after line 31: nvidiactl / nvidia-uvm may follow there.
    "frigate-8652-2051.conf": {("missing-nvidiactl", None), ("missing-nvidia-uvm", None)},
    "schmidt-silas-fragment.conf": {("dynamic-major", 2)},
    # (cut) after the nvidiactl entry: the missing nvidia-uvm is about the recorded text.
    "sdwebui-682-4237.conf": {("apparmor-unconfined", 1), ("cgroup-v1-key", 10), ("cgroup-v1-key", 11),
                              ("cgroup-v1-key", 12), ("dynamic-major", 11), ("device-not-allowed", 13),
                              ("device-not-allowed", 14), ("privileged", None), ("missing-nvidia-uvm", None),
                              ("no-model-mount", None)},
    "telmate-1138-fragment.conf": {("dynamic-major", 4), ("dynamic-major", 5)},
    # The tun device of snapshot [fresh] (line 25) is not the running config: not audited. No GPU is
    # passed through: the model-store check is for GPU containers only.
    "tteck-2230-100-snapshots.conf": set(),
}
QEMU = "vgpu-unlock-30-qemu-100.conf"  # a QEMU VM config, refused by the container audit


def run(name: str, **options) -> audit.Report:
    return audit.audit(lxcconf.read_file(DATA / name), audit.Options(**options))


def test_every_recorded_config_is_in_the_table():
    assert sorted(p.name for p in DATA.glob("*.conf")) == sorted([*EXPECTED, QEMU])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_findings_of_each_real_config(name):
    report = run(name)
    assert {(f.id, f.line) for f in report.findings} == EXPECTED[name]
    assert len(report.findings) == len(EXPECTED[name])  # no finding twice
    for f in report.findings:
        assert f.severity in audit.SEVERITIES and f.risk and f.fix and f.message
        if f.line is not None:  # the quoted text is that line of the file
            assert (DATA / name).read_text().split("\n")[f.line - 1] == f.text


def test_six_real_configs_get_findings_and_the_clean_ones_none():
    flagged = [n for n in EXPECTED if run(n).findings]
    assert len(flagged) >= 6 and not run("clean-devn-onboard.conf").failing
    assert "memory-too-small" in {s["check"] for s in run("clean-devn-onboard.conf").skipped}


def test_each_check_has_a_real_config_or_a_case_below():
    seen = {i for ids in EXPECTED.values() for i, _line in ids} | {"memory-too-small"}
    by_text = {"host-library-mount", "mixed-passthrough"}  # no public config recorded: cases below
    assert seen | by_text == {
        "privileged", "devices-allow-all", "apparmor-unconfined", "cap-drop-empty", "dynamic-major",
        "cgroup-v1-key", "device-not-allowed", "missing-nvidiactl", "missing-nvidia-uvm", "host-library-mount",
        "mixed-passthrough", "no-model-mount", "memory-too-small"}


@pytest.mark.parametrize("name, line, mib", [
    ("community-scripts-8605-103.conf", 5, 2048), ("frigate-8652-2051.conf", 5, 16384),
    ("i915sriov-308-110-devn.conf", 8, 3072), ("sdwebui-682-4237.conf", 6, 16384),
    ("tteck-2230-100-snapshots.conf", 5, 512)])
def test_memory_against_staged_weights_plus_servers(name, line, mib):
    (f,) = [f for f in run(name, model_bytes=54 * GIB).findings if f.id == "memory-too-small"]
    assert f.line == line and f.severity == "high" and f"memory {mib} MiB" in f.message
    assert "56.5 GiB" in f.message  # 54 GiB of weights + one server's 2.5 GiB


def test_memory_boundary_on_the_clean_config():
    # 64 GiB of memory: 61.5 GiB of weights + one 2.5 GiB server fit exactly; two servers do not.
    assert not run("clean-devn-onboard.conf", model_bytes=int(61.5 * GIB)).findings
    (f,) = run("clean-devn-onboard.conf", model_bytes=int(61.5 * GIB), servers=2).findings
    assert f.id == "memory-too-small" and "pct set N -memory 68096" in f.fix


def test_fragments_skip_what_they_cannot_show():
    report = run("telmate-1138-fragment.conf", model_bytes=GIB)
    assert not report.complete and report.memory_mib is None
    assert {s["check"] for s in report.skipped} == {"privileged", "no-model-mount", "memory-too-small"}
    no_gpu = run("tteck-2230-100-snapshots.conf")
    assert {s["check"] for s in no_gpu.skipped} >= {"missing-nvidiactl", "missing-nvidia-uvm", "no-model-mount"}
    (why,) = [s["why"] for s in no_gpu.skipped if s["check"] == "no-model-mount"]
    assert "no GPU" in why


def test_a_qemu_vm_config_is_named_as_one_not_read_as_a_fragment():
    conf = lxcconf.read_file(DATA / QEMU)
    with pytest.raises(lxcconf.LxcConfError) as exc:
        audit.audit(conf)
    message = str(exc.value)
    assert "QEMU virtual machine" in message and "vgpu-unlock-30-qemu-100.conf" in message
    assert "hostpci0" in message and "fragment" not in message
    assert "/etc/pve/lxc/" in exc.value.hint and "SSH host" in exc.value.hint


def test_model_source_must_sit_under_a_mount_point():
    assert not run("clean-devn-onboard.conf", model_source="/mnt/models/Qwen3-32B").findings
    (f,) = run("clean-devn-onboard.conf", model_source="/srv/weights/Qwen3-32B").findings
    assert f.id == "no-model-mount" and "/srv/weights/Qwen3-32B" in f.message
    # frigate-8652 has four mount points, none of them a model store at /mnt/models.
    assert ("no-model-mount", None) in {(f.id, f.line) for f in run("frigate-8652-2051.conf",
                                                                      model_source="/mnt/models/x").findings}


def text_audit(tmp_path, text: str, **options) -> audit.Report:
    path = tmp_path / "400.conf"
    path.write_text(text)
    return audit.audit(lxcconf.read_file(path), audit.Options(**options))


CLEAN = (DATA / "clean-devn-onboard.conf").read_text()


def test_host_library_folders_bound_in(tmp_path):
    # The clean config plus the host-library lines that guides post (a bind of libnvidia-ml and nvidia-smi).
    report = text_audit(tmp_path, CLEAN + (
        "lxc.mount.entry: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 "
        "none bind,ro,create=file\n"
        "lxc.mount.entry: /usr/bin/nvidia-smi usr/bin/nvidia-smi none bind,ro,create=file\n"
        "lxc.mount.entry: /srv/usr-libfake srv/x none bind,create=dir\n"))
    assert [(f.id, f.line) for f in report.findings] == [("host-library-mount", 18), ("host-library-mount", 19)]
    mp = text_audit(tmp_path, CLEAN.replace("mp0: /srv/models", "mp0: /usr/lib/x86_64-linux-gnu"))
    assert {(f.id, f.line) for f in mp.findings} == {("host-library-mount", 12), ("no-model-mount", None)}


def test_devn_mixed_with_classic_lines(tmp_path):
    report = text_audit(tmp_path, CLEAN + "lxc.cgroup2.devices.allow: c 195:* rwm\n"
                        "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file\n")
    (f,) = report.findings
    assert (f.id, f.line) == ("mixed-passthrough", 18) and "2 classic" in f.message and "line 3" in f.message


def test_unprivileged_zero_names_its_line(tmp_path):
    (f,) = text_audit(tmp_path, CLEAN.replace("unprivileged: 1", "unprivileged: 0")).findings
    assert (f.id, f.line, f.text) == ("privileged", 17, "unprivileged: 0")
    assert not text_audit(tmp_path, CLEAN.replace("unprivileged: 1", "unprivileged: yes")).findings


# -- the CLI -----------------------------------------------------------------------------------

def cli(argv, capsys) -> tuple[int, str, str]:
    from gpunode.cli.main import main

    code: object = 0
    try:
        main(["gpunode", "audit", *argv])
    except SystemExit as done:
        code = done.code
    out = capsys.readouterr()
    return (code if isinstance(code, int) else 1 if code else 0), out.out, out.err


def test_cli_json_document(capsys):
    code, out, err = cli(["--json", "--model-size-gib", "54", "--config", str(DATA / "sdwebui-682-4237.conf"),
                          "--config", str(DATA / "clean-devn-onboard.conf")], capsys)
    doc = json.loads(out)
    assert code == 1 and doc["schema"] == "gpunode.audit/1"
    first, clean = doc["configs"]
    assert first["source"].endswith("sdwebui-682-4237.conf") and clean["findings"] == []
    assert first["nvidia_nodes"] == ["/dev/nvidia0", "/dev/nvidiactl"] and first["memory_mib"] == 16384
    assert set(first["findings"][0]) == {"id", "severity", "line", "text", "message", "risk", "fix"}
    assert doc["summary"] == {"configs": 2, "findings": 11, "high": 6, "warning": 5, "info": 0}


def test_cli_clean_exits_0_and_says_so(capsys):
    code, out, _ = cli(["--config", str(DATA / "clean-devn-onboard.conf")], capsys)
    assert code == 0 and "clean-devn-onboard.conf: no findings" in out


def test_cli_text_shows_line_risk_and_fix(capsys):
    code, out, _ = cli(["--config", str(DATA / "community-scripts-8605-103.conf")], capsys)
    assert code == 1
    assert "line 13   high    devices-allow-all" in out and "| lxc.cgroup2.devices.allow: a" in out
    assert "risk: " in out and "fix:  " in out


def test_cli_model_dir_sizes_the_weights(tmp_path, capsys):
    (tmp_path / "m" / "sub").mkdir(parents=True)
    (tmp_path / "m" / "config.json").write_bytes(b"{}")
    with open(tmp_path / "m" / "sub" / "model.safetensors", "wb") as f:
        f.truncate(62 * GIB)  # sparse: its size counts, no disk is used
    argv = ["--json", "--model-dir", str(tmp_path / "m"), "--config", str(DATA / "clean-devn-onboard.conf")]
    code, out, _ = cli(argv, capsys)
    (f,) = json.loads(out)["configs"][0]["findings"]
    assert code == 1 and f["id"] == "memory-too-small" and "staged weights 62.0 GiB" in f["message"]
    (tmp_path / "m" / "sub" / "model.safetensors").unlink()
    code, out, _ = cli(argv, capsys)
    assert code == 0 and json.loads(out)["configs"][0]["skipped"] == []  # the check ran, and passed


@pytest.mark.parametrize("files, argv, words", [
    ({}, ["--config", "{d}/nope.conf"], "nope.conf: cannot read the file"),
    ({"bad.conf": b"arch: amd64\nhostname: caf\xe9\n"}, ["--config", "{d}/bad.conf"], "bad.conf:2: not UTF-8"),
    ({"bad.conf": b"arch: amd64\nthis is not a key\n"}, ["--config", "{d}/bad.conf"],
     "bad.conf:2: cannot read line 'this is not a key'"),
    ({"bad.conf": b"lxc.cgroup2.devices.allow: c nvidia rwm\n"}, ["--config", "{d}/bad.conf"], "bad.conf:1: "),
    ({}, [], "give --config FILE"),
    ({"100.conf": (DATA / QEMU).read_bytes()}, ["--config", "{d}/100.conf"], "100.conf: a QEMU virtual machine"),
    ({}, ["--config", "x", "--model-size-gib", "lots"], "--model-size-gib 'lots' is not a size"),
    ({}, ["--config", "x", "--servers", "0"], "--servers '0' is not a whole number"),
    ({}, ["--config", "x", "--model-dir", "{d}/none"], "--model-dir {d}/none: not a folder"),
])
def test_cli_bad_input_exits_2_naming_file_and_line(tmp_path, capsys, files, argv, words):
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    good = ["--config", str(DATA / "clean-devn-onboard.conf")]  # read first: still no half report
    code, out, err = cli(good + [a.replace("{d}", str(tmp_path)) for a in argv] if argv and argv[0] == "--config"
                         else [a.replace("{d}", str(tmp_path)) for a in argv], capsys)
    assert code == 2 and out == "", out
    assert words.replace("{d}", str(tmp_path)) in err and "Traceback" not in err and "hint: " in err


def pct_inventory(tmp_path, body: str) -> Path:
    """A host reached with connection: local whose pct is a script: the task's own pct call, run for real."""
    pct = tmp_path / "pct"
    pct.write_text("#!/bin/sh\n" + body)
    pct.chmod(pct.stat().st_mode | stat.S_IXUSR)
    inv = tmp_path / "inv"
    inv.mkdir()
    (inv / "hosts.yml").write_text(
        f"hosts:\n  node1:\n    connection: local\n    pct_path: {pct}\n"
        "    containers:\n      230: {vars: {model_source: /mnt/models/Qwen3-32B}}\n      231: {}\n")
    return inv


def test_cli_host_reads_pct_config_of_each_listed_container(tmp_path, capsys):
    inv = pct_inventory(tmp_path, f'[ "$1" = config ] || exit 9\ncase "$2" in\n'
                        f'  230) cat {DATA / "clean-devn-onboard.conf"};;\n'
                        f'  231) cat {DATA / "frigate-8652-2051.conf"};;\n  *) exit 9;;\nesac\n')
    code, out, _ = cli(["--json", "--inventory", str(inv), "--host", "node1"], capsys)
    doc = json.loads(out)
    assert code == 1 and [c["source"] for c in doc["configs"]] == ["node1/230", "node1/231"]
    assert doc["configs"][0]["findings"] == []  # /mnt/models/Qwen3-32B sits under its mp0
    ids = {f["id"] for f in doc["configs"][1]["findings"]}
    assert ids == {"missing-nvidiactl", "missing-nvidia-uvm"}


def test_cli_host_pct_failure_is_exit_2_with_its_stderr(tmp_path, capsys):
    inv = pct_inventory(tmp_path, "echo \"Configuration file 'nodes/pve/lxc/$2.conf' does not exist\" >&2\nexit 2\n")
    code, out, err = cli(["--inventory", str(inv), "--host", "node1", "--ct", "299"], capsys)
    assert code == 2 and out == ""
    assert "pct config 299 failed with exit code 2" in err and "nodes/pve/lxc/299.conf' does not exist" in err
