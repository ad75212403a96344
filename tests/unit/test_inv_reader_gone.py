"""`inv --list | true` in a checkout ends quietly with 0, as `gpunode --list | true` does
(tests/unit/test_cli_flags.py): Invoke's own program prints the list, outside gpunode's handlers,
so tasks.py's excepthook is what catches the closed pipe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INV = Path(sys.executable).parent / "inv"


@pytest.mark.skipif(not INV.exists(), reason="invoke's inv script is not beside this Python")
@pytest.mark.parametrize("argv", [["--list"], ["provision", "--help"]])
def test_a_reader_that_goes_away_is_no_traceback(argv):
    # without PYTHONUNBUFFERED (a user's shell): the output waits in stdout's buffer until the exit
    env = {k: v for k, v in os.environ.items() if k not in ("GPUNODE_DEBUG", "PYTHONUNBUFFERED")}
    proc = subprocess.Popen([str(INV), *argv], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert "Traceback" not in err and "Exception ignored" not in err, err


def test_other_errors_still_get_pythons_report():
    code = ("import sys, runpy; runpy.run_path('tasks.py'); "
            "sys.excepthook(KeyError, KeyError('x'), None)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "KeyError: 'x'" in out.stderr, out.stderr
