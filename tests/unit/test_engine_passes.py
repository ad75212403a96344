"""The one-pass probes give each file, directory, symlink and service step exactly what its own
probe prints, from one stat, one grep (small files read whole), one sha256sum (the rest) and one
systemctl show for all of them."""

from __future__ import annotations

import os
import re
from pathlib import Path

from gpunode.engine import passes, probe
from gpunode.steps import reads
from gpunode.steps.base import NoChange, Probe
from gpunode.steps.files import Directory, File, Symlink
from gpunode.steps.systemd import Service
from gpunode.steps.venv import Venv
from gpunode.steps.weights import StagedWeights
from gpunode.transport import LocalTransport


def _tree(root: Path) -> list:
    (root / "etc").mkdir()
    (root / "etc" / "same.conf").write_text("same\n")
    (root / "etc" / "other.conf").write_text("old content\n")
    (root / "etc" / "key").write_text("old secret\n")
    os.chmod(root / "etc" / "key", 0o600)
    (root / "etc" / "a dir with spaces").mkdir()
    (root / "etc" / "no-newline").write_bytes(b"last line without its newline")
    (root / "etc" / "empty").write_bytes(b"")
    (root / "etc" / "latin1").write_bytes(b"caf\xe9\n")
    (root / "etc" / "nul").write_bytes(b"a\0b\n\0\n")
    (root / "etc" / "breaks").write_bytes("cr\r\nff\x0c nel\x85 ls\u2028 end\n".encode())
    (root / "etc" / "unreadable").write_bytes(b"")  # empty, as the desired content: yet not read
    (root / "etc" / "big").write_bytes(b"y\n" * reads.READ_LIMIT)
    os.symlink("/usr/bin/true", root / "link")
    os.symlink(str(root / "etc"), root / "dirlink")
    os.mkfifo(root / "fifo")
    return [
        File(str(root / "etc" / "same.conf"), "same\n"),
        File(str(root / "etc" / "other.conf"), "new content\n"),
        File(str(root / "etc" / "key"), "new secret\n", sensitive=True),
        File(str(root / "missing.conf"), "x"),
        File(str(root / "etc" / "no-newline"), "last line without its newline"),
        File(str(root / "etc" / "no-newline"), "last line without its newline\n"),
        File(str(root / "etc" / "empty"), ""),
        File(str(root / "etc" / "empty"), "now something\n"),
        File(str(root / "etc" / "latin1"), "café\n"),
        File(str(root / "etc" / "nul"), "a\0b\n\0\n"),
        File(str(root / "etc" / "nul"), "a\0b\n"),
        File(str(root / "etc" / "breaks"), "cr\r\nff\x0c nel\x85 ls\u2028 end\n"),
        File(str(root / "etc" / "breaks"), "cr\nff nel ls end\n"),
        File(str(root / "etc" / "big"), "y\n" * reads.READ_LIMIT),
        File(str(root / "etc" / "big"), "y\n" * (reads.READ_LIMIT - 1)),
        File(str(root / "link"), "x"),
        File(str(root / "fifo"), "x"),
        File(str(root / "etc"), "x"),
        Directory(str(root / "etc")),
        Directory(str(root / "etc" / "a dir with spaces")),
        Directory(str(root / "etc" / "same.conf")),
        Directory(str(root / "nodir")),
        Directory(str(root / "dirlink")),
        Symlink(str(root / "link"), "/usr/bin/true"),
        Symlink(str(root / "etc" / "same.conf"), "/x"),
        Symlink(str(root / "nolink"), "/x"),
    ]


def test_each_step_gets_what_its_own_probe_prints_or_none(tmp_path: Path):
    steps = _tree(tmp_path)
    own = probe.run_batch(LocalTransport(), [s.probe() for s in steps])  # plain argvs: each runs as it is
    folded = passes.fold([s.batched() for s in steps])
    # 24 steps: one stat; one sha256sum for the secret and the big file; one grep for the rest
    assert [[w for w in ("stat", "sha256sum", "grep") if f" {w} -" in a[2]] for a in folded.argvs] == \
           [["stat"], ["sha256sum"], ["grep"]]
    assert f"{tmp_path}/etc/key" not in folded.argvs[2]  # a secret is never read back
    got = folded.unfold(probe.run_batch(LocalTransport(), folded.argvs))
    for step, mine, theirs in zip(steps, got, own, strict=True):
        if mine is not None:
            assert mine == theirs, step.id
    undecided = [(s.id, getattr(s, "content", "")[:4]) for s, mine in zip(steps, got, strict=True) if mine is None]
    # Where grep's lines cannot be the bytes (not UTF-8), and the big file whose hash differs, need
    # their own probe for the diff; [ -d ] follows the directory's link.
    assert undecided == [(f"file:{tmp_path}/etc/latin1", "café"), (f"file:{tmp_path}/etc/big", "y\ny\n"),
                         (f"dir:{tmp_path}/dirlink", "")]
    assert isinstance(steps[0].check(got[0]), NoChange)  # the unchanged file needs nothing
    changed = steps[1].check(got[1])  # the old content came back in the same pass, for the diff
    assert "-old content\n+new content\n" in changed.diff


def test_other_probes_run_as_they_are_and_keep_their_place(tmp_path: Path):
    argvs = [["echo", "first"], File(str(tmp_path / "f"), "x").batched(), ["echo", "last"]]
    folded = passes.fold(argvs)
    got = folded.unfold(probe.run_batch(LocalTransport(), folded.argvs))
    assert got[0] == Probe(0, "first\n") and got[2] == Probe(0, "last\n")
    assert got[1] == Probe(0, "missing\n")


# Recorded in the lab's container 200 (Debian 12, systemd 252), 2026-12-03:
#   lxc-attach -P /var/lib/gpunode-lab/lxc -n 200 -- systemctl show -pLoadState -pUnitFileState
#     -pActiveState -pSubState -pNeedDaemonReload -- ssh.service nosuch.service gpunode-demo.service
SHOW_THREE = """LoadState=masked
ActiveState=inactive
SubState=dead
UnitFileState=masked
NeedDaemonReload=no

LoadState=not-found
ActiveState=inactive
SubState=dead
UnitFileState=
NeedDaemonReload=no

LoadState=loaded
ActiveState=active
SubState=running
UnitFileState=enabled
NeedDaemonReload=no
"""


def test_one_systemctl_show_answers_every_service_in_order():
    names = ["ssh.service", "nosuch.service", "gpunode-demo.service"]
    steps = [Service(n) for n in names] + [Service("ssh.service", enabled=False)]
    folded = passes.fold([s.batched() for s in steps])
    [argv] = folded.argvs  # one systemctl show, in the shell that may reuse its last answer
    assert argv[:2] == ["sh", "-c"] and argv[-3:] == names
    assert "systemctl show -pLoadState -pUnitFileState -pActiveState -pSubState -pNeedDaemonReload --" in argv[2]
    got = folded.unfold([Probe(0, SHOW_THREE)])
    assert "LoadState=not-found" in got[1].output and "SubState=running" in got[2].output
    assert got[3] == got[0]
    assert "masked" in str(_refusal(steps[0], got[0]))
    # systemd not answering (not PID 1): every service falls back to its own probe and its error
    assert folded.unfold([Probe(1, "System has not been booted with systemd\n")]) == [None] * 4


def _refusal(step, result):
    try:
        return step.check(result)
    except Exception as exc:  # noqa: BLE001 - the refusal is what is looked at
        return exc


def test_a_stat_that_is_not_gnus_makes_every_file_step_probe_itself(tmp_path: Path):
    steps = [File(str(tmp_path / "f"), "x"), Directory(str(tmp_path)), Service("a.service")]
    folded = passes.fold([s.batched() for s in steps])
    # busybox stat knows no --printf: nothing parses, so nothing may be taken as "missing"
    got = folded.unfold([Probe(0, "stat: unrecognized option '--printf'\n"), Probe(0, ""),
                         Probe(0, SHOW_THREE.split("\n\n")[0] + "\n")])
    assert got[:2] == [None, None] and got[2] is not None


def _manifested(root: Path) -> list:
    """Venv and weights steps over real folders: with a manifest, without one, and missing."""
    (root / "v1" / "bin").mkdir(parents=True)
    os.symlink("/usr/bin/true", root / "v1" / "bin" / "python")
    (root / "v1" / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.2\n")
    (root / "v1" / "lib" / "python3.11" / "site-packages" / "pkg").mkdir(parents=True)
    (root / "v1" / "gpunode-lock.json").write_text('{\n "spec_hash": "abc",\n "listing": "x"\n}\n')
    (root / "v2" / "bin").mkdir(parents=True)  # no manifest: an install cut off
    (root / "src").mkdir()
    (root / "src" / "model.safetensors").write_bytes(b"\0" * 1000)
    (root / "shm").mkdir()
    (root / "shm" / "model.safetensors").write_bytes(b"\0" * 1000)
    (root / "shm" / ".gpunode-manifest").write_text("model.safetensors\t1000\t1.0\n")
    return [Venv(path=str(root / "v1")), Venv(path=str(root / "v2")), Venv(path=str(root / "none")),
            StagedWeights(source=str(root / "src"), dest=str(root / "shm")),
            StagedWeights(source=str(root / "src"), dest=str(root / "not-staged")),
            StagedWeights(source=str(root / "nosrc"), dest=str(root / "shm"))]


def test_venv_and_weights_manifests_come_from_one_grep_byte_for_byte(tmp_path: Path):
    steps = _manifested(tmp_path)
    t = LocalTransport()
    argvs = [s.probe() for s in steps]
    folded = passes.fold([s.batched() for s in steps])
    assert not any(argv[2] == s.probe()[2] for argv in folded.argvs for s in steps)  # no probe with its cat
    assert "grep -aHZ" in folded.argvs[-1][2]
    got = probe.run_batch(t, [s.batched() for s in steps])
    own = [t.run(a) for a in argvs]
    # df's free bytes move between two runs on a shared disk: that section is compared as its shape
    space = re.compile(r"(@@section space\n.*\n)[0-9]+ [0-9]+\n")
    assert [(p.exit_code, space.sub(r"\1N N\n", p.output)) for p in got] == \
           [(r.exit_code, space.sub(r"\1N N\n", r.stdout)) for r in own]
    assert '"spec_hash": "abc"' in got[0].output and "model.safetensors\t1000\t1.0\n@@section space" in got[3].output


def test_a_manifest_read_in_the_pass_starts_no_cat(tmp_path: Path):
    steps = _manifested(tmp_path)
    log = tmp_path / "execve.log"
    nonce = "gpunode-0123456789abcdef"
    folded = passes.fold([s.batched() for s in steps])
    out = LocalTransport().run(["strace", "-f", "-qq", "-e", "trace=execve", "-e", "signal=none", "-o", str(log),
                                "sh", "-s"], stdin=probe.build(folded.argvs, nonce).encode(), check=True).stdout
    results = folded.unfold(probe.parse(out, len(folded.argvs), nonce))
    assert all(r is not None for r in results)
    names = [line.split('execve("', 1)[1].split('"', 1)[0].rsplit("/", 1)[-1] for line in log.read_text().splitlines()
             if "execve(" in line and "ENOENT" not in line and "resumed" not in line]
    assert "cat" not in names and names.count("grep") == 1, names


def test_what_grep_printed_is_taken_for_the_file_only_where_it_can_be_its_exact_bytes():
    """The stat pass says how big the file is; lines that do not add up to that, or that went
    through the transport's replacement of bytes that are not UTF-8, are not the file."""
    def got(desired: str, size: int, printed: str) -> Probe | None:
        step = File("/etc/x.env", desired)
        folded = passes.fold([step.batched()])
        records = [("/", "directory", "755 root root 4096"), ("/etc/x.env", "regular file", f"644 root root {size}")]
        stat = "".join(f"{name}\x00{kind}\x00{meta}\x00{name}\x00" for name, kind, meta in records)
        lines = "".join(f"/etc/x.env\x00{line}\n" for line in printed.split("\n") if printed)
        return folded.unfold([Probe(0, stat), Probe(0, lines)])[0]

    assert got("", 5, "") is None                    # unreadable: empty desired content is no proof
    assert got("a\n", 2, "a") is not None and "\na\n" not in got("a\n", 2, "a").output
    assert got("\ufffd\n", 4, "\ufffd") is None      # three bytes that were not UTF-8 look like one U+FFFD
    assert got("ab\n", 3, "ab\nc") is None           # grew between the stat and the grep
    changed = got("new\n", 4, "old")
    assert changed is not None and changed.output.endswith("\nold\n")  # the old content, for the diff
