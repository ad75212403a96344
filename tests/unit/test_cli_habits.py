"""What an Ansible or pyinfra user types (issue 43), through the installed `gpunode` console script,
a real process with its real stdout/stderr: each works with the meaning they know, or is refused
naming what to use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GPUNODE = Path(sys.executable).parent / "gpunode"

INVENTORY = """\
hosts:
  lab:
    address: 127.0.0.1
    port: 1
    containers:
      200: {vars: {model_source: /mnt/models/m}}
"""


def gpunode(*argv: str, cwd: Path, stdin=subprocess.DEVNULL, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("GPUNODE_") and k not in ("PVE_TOKEN_SECRET",)}
    base.update(HOME=str(cwd), XDG_CACHE_HOME=str(cwd / ".cache"), COLUMNS="80", **(env or {}))
    # start_new_session: no controlling terminal, as under cron or a CI runner
    return subprocess.run([str(GPUNODE), *argv], cwd=cwd, env=base, stdin=stdin, capture_output=True, text=True,
                          timeout=60, start_new_session=True)


def site(tmp_path: Path) -> Path:
    (tmp_path / "inv").mkdir()
    (tmp_path / "inv" / "hosts.yml").write_text(INVENTORY)
    return tmp_path / "inv"


def test_ask_become_pass_without_a_terminal_is_a_clear_refusal(tmp_path):
    inv = site(tmp_path)
    got = gpunode("provision", "-i", str(inv), "--host", "lab", "--ct", "200", "-K", cwd=tmp_path)
    assert got.returncode == 2, got.stderr
    assert "-K/--ask-become-pass: there is no terminal" in got.stderr
    assert "GPUNODE_BECOME_PASSWORD" in got.stderr
    assert "EOFError" not in got.stderr and "internal error" not in got.stderr
