"""The container-config parser on real configs (tests/data/lxc-configs/README.md says where each came from)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunode.pve import lxcconf
from gpunode.pve.lxcconf import LxcConfError

DATA = Path(__file__).resolve().parents[1] / "data" / "lxc-configs"


def load(name: str) -> lxcconf.LxcConf:
    return lxcconf.read_file(DATA / name)


def test_snapshot_sections_are_not_the_current_config():
    conf = load("tteck-2230-100-snapshots.conf")
    assert conf.snapshots == ["fresh", "tailscale"]
    assert [line.number for line in conf.lines] == list(range(1, 12))
    # The tun device of the [fresh] snapshot (lines 25-26) is not in the running config.
    assert conf.raw("lxc.cgroup2.devices.allow") == [] and lxcconf.allows(conf) == []
    assert conf.value("parent") == "tailscale" and conf.value("memory") == "512"


def test_keys_keep_their_line_numbers_and_raw_keys_their_order():
    conf = load("sdwebui-682-4237.conf")
    assert conf.get("lxc.apparmor.profile").number == 1
    assert [(a.line.number, a.major, a.minor, a.cgroup_v1) for a in lxcconf.allows(conf)] == [
        (10, 195, None, True), (11, 506, None, True), (12, 226, None, True)]
    entries = [lxcconf.mount_entry(conf, line) for line in conf.raw("lxc.mount.entry")]
    assert [(m.line.number, m.source, m.target, m.create_dir) for m in entries] == [
        (13, "/dev/nvidia0", "/dev/nvidia0", False), (14, "/dev/nvidiactl", "/dev/nvidiactl", False)]
    assert conf.get("unprivileged") is None and conf.complete


def test_empty_values_where_pve_accepts_them():
    # `lxc.cap.drop:` with nothing after it is a valid raw key (it empties the list);
    # `tags:  ` with only spaces passes PVE's key regex too.
    cap = load("community-scripts-8605-103.conf").get("lxc.cap.drop")
    assert (cap.number, cap.value) == (14, "")
    tags = load("i915sriov-308-110-devn.conf").get("tags")
    assert (tags.number, tags.value) == (16, "")
    allow_all = lxcconf.allows(load("community-scripts-8605-103.conf"))[0]
    assert allow_all.everything and allow_all.line.number == 13 and allow_all.covers(195, 255)


def test_devn_and_mount_points():
    conf = load("i915sriov-308-110-devn.conf")
    assert [lxcconf.device(conf, line) for line in conf.indexed("dev")] == ["/dev/dri/card0", "/dev/dri/renderD128"]
    assert lxcconf.property_string(conf, conf.get("dev0"), "path") == {"path": "/dev/dri/card0", "gid": "44"}
    (mp,) = [lxcconf.mount_point(conf, line) for line in conf.indexed("mp")]
    assert (mp.source, mp.target, mp.line.number) == ("/mnt/lxc_jellyfin/jellyfin/", "/mnt/jellyfin", 9)


def test_minor_specific_allows():
    conf = load("frigate-8652-2051.conf")
    rules = lxcconf.allows(conf)
    assert any(r.covers(195, 1) for r in rules)
    assert not any(r.covers(195, 255) for r in rules)  # nvidiactl's minor: not allowed by these lines


def test_fragments_are_not_complete_configs():
    conf = load("telmate-1138-fragment.conf")
    assert not conf.complete and len(conf.lines) == 10


def test_pending_section_and_equals_form_and_description(tmp_path):
    path = tmp_path / "105.conf"
    path.write_text("#GPU box\n#  second line\narch: amd64\nlxc.apparmor.profile = generated\n"
                    "rootfs: local:105/vm-105-disk-0.raw,size=8G\n\n[pve:pending]\nmemory: 4096\n")
    conf = lxcconf.read_file(path)
    assert conf.pending and conf.get("memory") is None
    assert conf.value("lxc.apparmor.profile") == "generated" and conf.get("lxc.apparmor.profile").number == 4
    assert conf.description == "GPU box\n  second line"


@pytest.mark.parametrize("text, line, words", [
    ("arch: amd64\nmemory:\n", 2, "cannot read line 'memory:'"),            # a key without a value
    ("arch: amd64\n  memory: 512\n", 2, "cannot read line '  memory: 512'"),  # PVE anchors keys at column 0
    ("arch: amd64\nlxc.cgroup2.devices.allow: c 195 rwm\nrootfs: x:1\n", 2, "c 195 rwm"),
    ("dev0: /dev/nvidia0,/dev/nvidia1\n", 1, "path given twice"),
    ("mp0: /srv/models\n", 1, "no absolute mp="),
    ("lxc.mount.entry: /dev/nvidia0 dev/nvidia0\n", 1, "not `SOURCE TARGET TYPE OPTIONS`"),
    ("dev0: nvidia0\n", 1, "not a device path"),
])
def test_lines_pve_would_refuse_name_file_and_line(tmp_path, text, line, words):
    path = tmp_path / "300.conf"
    path.write_text(text)
    with pytest.raises(LxcConfError) as err:
        conf = lxcconf.read_file(path)
        lxcconf.allows(conf)
        for dev in conf.indexed("dev"):
            lxcconf.device(conf, dev)
        for mp in conf.indexed("mp"):
            lxcconf.mount_point(conf, mp)
        for entry in conf.raw("lxc.mount.entry"):
            lxcconf.mount_entry(conf, entry)
    assert str(err.value).startswith(f"{path}:{line}: ") and words in str(err.value)
    assert "hint: " in str(err.value)


def test_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "301.conf"
    path.write_bytes(b"arch: amd64\nhostname: caf\xe9\n")
    with pytest.raises(LxcConfError, match=r"301.conf:2: not UTF-8 text \(byte 0xe9\)"):
        lxcconf.read_file(path)


def test_unreadable_file(tmp_path):
    with pytest.raises(LxcConfError, match=r"missing.conf: cannot read the file \(No such file or directory\)"):
        lxcconf.read_file(tmp_path / "missing.conf")
    with pytest.raises(LxcConfError, match=r"cannot read the file \(Is a directory\)"):
        lxcconf.read_file(tmp_path)
