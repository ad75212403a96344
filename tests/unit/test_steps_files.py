"""Directory, File, Template and Symlink against real temp folders: the sentences a user
reads, the diffs, and that apply makes the next check a no-op."""

from __future__ import annotations

import hashlib
import os

import pytest

from gpunode.engine.probe import run_one
from gpunode.errors import StepError
from gpunode.steps.base import Change, NoChange, Step
from gpunode.steps.files import DIFF_LIMIT, Directory, File, Symlink, Template, text_diff
from gpunode.steps.render import render
from gpunode.transport import LocalTransport

T = LocalTransport()


def check(step: Step):
    return step.check(run_one(T, step.probe()))


def converge(step: Step):
    """Apply and return the check that follows, which must say nothing is left to do."""
    step.apply(T)
    after = check(step)
    assert isinstance(after, NoChange), after
    return after


def sha8(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:8]


def test_file_missing_then_created_then_already_there(tmp_path):
    path = tmp_path / "etc/demo.conf"
    step = File(str(path), "port=8099\n", mode=0o640)
    sha = sha8(b"port=8099\n")
    plan = check(step)
    assert plan == Change(f"create {path} (10 bytes, sha256 {sha}, mode 0640)",
                          f"--- {path} (target)\n+++ {path} (desired)\n@@ -0,0 +1 @@\n+port=8099\n")
    done = converge(step)
    assert path.read_text() == "port=8099\n" and path.stat().st_mode & 0o777 == 0o640
    assert done.reason == f"{path} already has the desired content (sha256 {sha}), mode 0640"
    assert [p.name for p in path.parent.iterdir()] == ["demo.conf"], "a temp file was left behind"


def test_file_content_change_has_a_unified_diff(tmp_path):
    path = tmp_path / "a.conf"
    path.write_text("a=1\nb=2\n")
    plan = check(File(str(path), "a=1\nb=3"))
    old, new = sha8(b"a=1\nb=2\n"), sha8(b"a=1\nb=3")
    assert plan.summary == f"update {path}: content sha256 {old} → {new}"
    assert plan.diff == (f"--- {path} (target)\n+++ {path} (desired)\n@@ -1,2 +1,2 @@\n a=1\n-b=2\n+b=3\n"
                         "\\ No newline at end of file\n")


def test_file_mode_and_owner_are_corrected_without_content_change(tmp_path):
    path = tmp_path / "secret.env"
    path.write_text("TOKEN=x\n")
    path.chmod(0o644)
    step = File(str(path), "TOKEN=x\n", mode=0o600, owner="nobody:nogroup", sensitive=True)
    plan = check(step)
    assert plan == Change(f"update {path}: mode 0644 → 0600, owner root:root → nobody:nogroup")
    done = converge(step)
    assert done.reason.endswith("mode 0600, owner nobody:nogroup")
    assert path.stat().st_uid != 0


def test_sensitive_and_binary_content_never_shows_in_a_diff(tmp_path):
    path = tmp_path / "token"
    path.write_text("old-secret\n")
    plan = check(File(str(path), "new-secret\n", sensitive=True))
    assert "old-secret" not in plan.diff and "new-secret" not in plan.diff
    assert "hidden" in check(File(str(tmp_path / "new"), "s3cr3t", sensitive=True)).diff
    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"\x00\x01\x02")
    assert check(File(str(blob), b"\x00\x01\x03")).diff == f"(diff of {blob} omitted: binary content)\n"


def test_a_large_file_is_compared_by_hash_and_not_sent_back_whole(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(b"x" * (DIFF_LIMIT * 2))
    step = File(str(path), "small\n")
    probe = run_one(T, step.probe())
    assert len(probe.output) < DIFF_LIMIT + 1000
    assert step.check(probe).diff == f"(diff of {path} omitted: the current file has {DIFF_LIMIT * 2} bytes)\n"


def test_file_replaces_a_symlink_and_refuses_a_directory(tmp_path):
    real = tmp_path / "real.conf"
    real.write_text("shared\n")
    link = tmp_path / "link.conf"
    link.symlink_to(real)
    step = File(str(link), "own\n")
    assert check(step).summary.startswith(f"replace the symlink {link} → {real} with a file")
    converge(step)
    assert not link.is_symlink() and real.read_text() == "shared\n"
    with pytest.raises(StepError, match=f"{tmp_path} exists but is a directory, not a regular file"):
        check(File(str(tmp_path), "x"))


def test_a_truncated_upload_never_replaces_the_file(tmp_path):
    path = tmp_path / "keep.conf"
    path.write_text("good\n")
    step = File(str(path), "new content\n")
    with pytest.raises(Exception, match="expected " + hashlib.sha256(b"new content\n").hexdigest()):
        T.write_file(str(path), b"new cont", sha256=step.sha256)
    assert path.read_text() == "good\n"
    assert sorted(os.listdir(tmp_path)) == ["keep.conf"]


def test_directory_created_then_mode_fixed(tmp_path):
    path = tmp_path / "srv/www"
    step = Directory(str(path), mode=0o750)
    assert check(step) == Change(f"create directory {path} (mode 0750)")
    assert converge(step).reason == f"{path} is already a directory with mode 0750"
    path.chmod(0o700)
    assert check(step) == Change(f"change {path}: mode 0700 → 0750")
    (tmp_path / "file").write_text("")
    with pytest.raises(StepError, match="is a regular empty file, not a directory"):
        check(Directory(str(tmp_path / "file")))


def test_symlink_created_repointed_and_left_alone(tmp_path):
    path = tmp_path / "bin/hello"
    step = Symlink(str(path), "/usr/bin/hello")
    assert check(step) == Change(f"create symlink {path} → /usr/bin/hello")
    assert converge(step).reason == f"{path} already points to /usr/bin/hello"
    other = Symlink(str(path), "/usr/local/bin/hello")
    assert check(other) == Change(f"repoint {path}: /usr/bin/hello → /usr/local/bin/hello")
    converge(other)
    assert os.readlink(path) == "/usr/local/bin/hello"


def test_symlink_replaces_a_file_only_when_forced(tmp_path):
    path = tmp_path / "cfg"
    path.write_text("x\n")
    with pytest.raises(StepError, match="is a regular file, not a symlink"):
        check(Symlink(str(path), "/etc/hostname"))
    forced = Symlink(str(path), "/etc/hostname", force=True)
    assert check(forced) == Change(f"replace the file {path} with a symlink to /etc/hostname")
    converge(forced)


def test_template_renders_with_header_and_refuses_undefined_variables(tmp_path):
    root = tmp_path / "templates"
    (root / "demo").mkdir(parents=True)
    (root / "demo/app.conf.j2").write_text("port={{ port }}\n")
    (root / "demo/run.sh.j2").write_text("#!/bin/sh\nexec app --port {{ port }}\n")
    assert render("demo/app.conf.j2", {"port": 8099}, root=root) == (
        "# managed by gpunode (template demo/app.conf.j2); local changes will be overwritten\nport=8099\n")
    script = render("demo/run.sh.j2", {"port": 1}, root=root)
    assert script.splitlines()[:2] == ["#!/bin/sh", "# managed by gpunode (template demo/run.sh.j2); "
                                       "local changes will be overwritten"]
    assert render("demo/app.conf.j2", {"port": 1}, root=root, comment=None) == "port=1\n"
    with pytest.raises(StepError, match=r"template demo/app.conf.j2 line \d+ uses a variable that is not set: 'port'"):
        render("demo/app.conf.j2", {}, root=root)


def test_template_step_is_a_file_with_rendered_content(tmp_path):
    with pytest.raises(StepError, match="template demo/nope.j2 not found"):
        Template(str(tmp_path / "x"), template="demo/nope.j2")


def test_a_diff_has_the_files_own_lines_not_pythons_line_breaks():
    # U+2028, a form feed and a lone CR inside a value are not line ends for the file (or systemd)
    old = "A=1\nNAME=x\u2028y\x0cz\rw\n"
    new = "A=2\nNAME=x\u2028y\x0cz\rw\n"
    diff = text_diff(old, new, "/etc/gpunode/a.env")
    assert diff.count("\n") == 6 and "-A=1\n+A=2\n NAME=x\u2028y\x0cz\rw\n" in diff
    missing_end = text_diff("a\nb", "a\nc", "/f")
    assert "-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n" in missing_end
