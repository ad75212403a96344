"""`inv kb.refresh` reading PyPI, run as a user runs it (the `gpunode` console entry), against a loopback
server that answers from the PyPI answers recorded in tests/data/pypi (tests/unit/pypi_server.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.unit.pypi_server import recorded_pypi

REPO = Path(__file__).resolve().parents[2]
PROPOSED = REPO / "src" / "gpunode" / "compat" / "proposed"


def proposed() -> list[Path]:
    """What is under compat/proposed/ (a maintainer's own proposals under review may be there)."""
    return sorted(PROPOSED.rglob("*")) if PROPOSED.exists() else []


def gpunode(base: str, *args: str) -> subprocess.CompletedProcess:
    code = "import sys; from gpunode.cli.main import main; sys.argv[0] = 'gpunode'; main()"
    return subprocess.run([sys.executable, "-c", code, "kb.refresh", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=120, env={**os.environ, "GPUNODE_PYPI_JSON": base})


def test_new_releases_since_the_pin_sets_are_named():
    with recorded_pypi() as base:
        out = gpunode(base, "--no-derive")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "new releases since the pin sets:" in lines
    assert "  sglang: newest on PyPI 0.5.23, newest pinned 0.5.23 (nothing new)" in lines
    assert "  sglang-kernel: newest on PyPI 0.4.10, newest pinned 0.4.10 (nothing new)" in lines
    assert ("  flashinfer-python: newest on PyPI 0.7.4, newest pinned 0.7.2; new: 0.7.2.post1 (2026-10-23), "
            "0.7.4 (2026-11-11)") in lines
    assert "  torch: newest on PyPI 2.15.0, newest pinned 2.14.1; new: 2.15.0 (2026-10-28)" in lines
    assert lines[0].startswith("kb.refresh: reading PyPI")    # says what it is doing before it does it


def test_propose_with_every_release_covered_says_so():
    before = proposed()
    with recorded_pypi() as base:
        out = gpunode(base, "--no-derive", "--propose")
    assert out.returncode == 0, out.stderr
    assert "every sglang release is covered by a pin set: nothing to propose" in out.stdout
    assert proposed() == before


def test_release_without_propose_is_refused():
    with recorded_pypi() as base:
        out = gpunode(base, "--no-derive", "--release", "0.5.23")
    assert out.returncode == 2 and "--release names the sglang release" in out.stderr and "--propose" in out.stderr


def test_a_release_whose_wheel_cannot_be_read_is_named():
    """torch 2.14.1 is not the newest torch, so its requirements come from its wheel: the recorded answers
    have no wheel files, as PyPI's files host would be unreachable."""
    before = proposed()
    with recorded_pypi() as base:
        out = gpunode(base, "--no-derive", "--propose", "--release", "0.5.23", "--no-lock")
    assert out.returncode == 2
    assert "torch-2.14.1-" in out.stderr and "files host could not be read" in out.stderr
    assert proposed() == before                              # nothing half-written


def test_a_release_not_on_pypi_is_refused_with_the_newest_named():
    with recorded_pypi() as base:
        out = gpunode(base, "--no-derive", "--propose", "--release", "0.5.99")
    assert out.returncode == 2 and "--release 0.5.99: sglang has no such release on PyPI" in out.stderr
    assert "0.5.23" in out.stderr


def test_a_pre_release_is_proposed_only_when_named_and_says_so():
    """(Its wheel is not among the recorded answers, so the run then stops there, writing nothing.)"""
    before = proposed()
    with recorded_pypi() as base:
        out = gpunode(base, "--no-derive", "--propose", "--release", "0.5.10rc0", "--no-lock")
    assert "sglang 0.5.10rc0 is a pre-release; proposing anyway" in out.stdout
    assert out.returncode == 2 and proposed() == before
