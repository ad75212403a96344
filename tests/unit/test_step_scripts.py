"""The shell scripts kept as .sh files beside the code that sends them (shellcheck reads them in
CI): each is read by that code, and what reaches a target is the script without the linter's lines."""

from __future__ import annotations

import re
from pathlib import Path

import gpunode
from gpunode.steps import apt, files, systemd
from gpunode.steps.base import script

SRC = Path(gpunode.__file__).parent
SHIPPED = sorted(p for d in ("steps", "engine") for p in (SRC / d).glob("*.sh"))


def test_every_script_file_is_sent_by_the_code_beside_it():
    assert SHIPPED
    code = {d: "".join(p.read_text() for p in (SRC / d).glob("*.py")) for d in ("steps", "engine")}
    assert [p.name for p in SHIPPED if f'"{p.name}"' not in code[p.parent.name]] == []


def test_the_linters_lines_stay_here_and_every_other_byte_goes(tmp_path: Path):
    (tmp_path / "x.sh").write_text("# shellcheck shell=sh\nset -e\n  # shellcheck disable=SC2086  # why\n"
                                   "echo $a  # shellcheck is not a directive here\n")
    assert script(str(tmp_path / "mod.py"), "x.sh") == "set -e\necho $a  # shellcheck is not a directive here\n"
    for sent in (files._FILE_PROBE, files._LINK_APPLY, systemd._SERVICE_APPLY, apt._INSTALL):
        assert not re.search(r"(?m)^\s*# shellcheck", sent)
    assert apt._INSTALL.startswith("set -e\nexport DEBIAN_FRONTEND=noninteractive\n")
