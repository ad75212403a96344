"""steps.localtree: the workstation's digest equals the target's (the real probe run by sh here)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpunode.errors import StepError
from gpunode.steps.base import Change, NoChange, Probe
from gpunode.steps.localtree import LocalTree, tree_digest
from gpunode.steps.ports import down


def make_tree(root: Path) -> Path:
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "x.h").write_text("#pragma once\n")
    (root / "a" / "b" / "run.sh").write_text("#!/bin/sh\n")
    (root / "a" / "b" / "run.sh").chmod(0o755)
    (root / "Z.h").write_text("upper case sorts first\n")
    os.symlink("a/x.h", root / "link.h")
    return root


def probe(step: LocalTree) -> Probe:
    proc = subprocess.run(step.probe(), capture_output=True, text=True)
    return Probe(proc.returncode, proc.stdout + proc.stderr)


def test_the_probe_on_a_copy_gives_the_local_digest(tmp_path):
    src = make_tree(tmp_path / "src")
    dest = tmp_path / "dest"
    subprocess.run(["cp", "-a", f"{src}/.", str(dest)], check=True)
    step = LocalTree(str(src), str(dest))
    assert probe(step).output.strip() == tree_digest(src)[0]
    assert isinstance(step.check(probe(step)), NoChange)


@pytest.mark.parametrize("spoil", ["mode", "content", "extra", "link"])
def test_any_difference_is_a_change(tmp_path, spoil):
    src = make_tree(tmp_path / "src")
    dest = tmp_path / "dest"
    subprocess.run(["cp", "-a", f"{src}/.", str(dest)], check=True)
    if spoil == "mode":
        (dest / "a" / "b" / "run.sh").chmod(0o644)
    elif spoil == "content":
        (dest / "Z.h").write_text("other\n")
    elif spoil == "extra":
        (dest / "a" / "left-over.h").write_text("")
    else:
        (dest / "link.h").unlink()
        os.symlink("Z.h", dest / "link.h")
    outcome = LocalTree(str(src), str(dest)).check(probe(LocalTree(str(src), str(dest))))
    assert isinstance(outcome, Change) and outcome.summary.startswith("replace ")


def test_a_missing_folder_is_copied(tmp_path):
    src = make_tree(tmp_path / "src")
    step = LocalTree(str(src), str(tmp_path / "nowhere"))
    outcome = step.check(probe(step))
    assert isinstance(outcome, Change) and outcome.summary.startswith("copy ") and "3 files" in outcome.summary


def test_a_missing_local_folder_is_named(tmp_path):
    step = LocalTree(str(tmp_path / "gone"), "/opt/x")
    with pytest.raises(StepError, match="gone does not exist"):
        step.check(Probe(0, "missing\n"))


def test_ports_down_lists_urls_without_200():
    urls = ["http://127.0.0.1:1/", "http://127.0.0.1:2/", "http://127.0.0.1:3/"]
    out = "http://127.0.0.1:1/ 200\nhttp://127.0.0.1:2/ 000\n"
    assert down(urls, out) == ["http://127.0.0.1:2/", "http://127.0.0.1:3/"]
