"""compat/kernel_sms.yml is what the pinned wheels hold: re-derived from the released wheels.

Every (kernel wheel, machine) that pinsets.yml pins (sglang-kernel, and vllm for the vLLM pin sets)
is downloaded from PyPI once (`pip download --no-deps`, cached under $GPUNODE_WHEEL_CACHE or
~/.cache/gpunode/kernel-wheels: about 3 GB) and read by gpunode.knowledge.fatbin; the rendered file must be
byte for byte the one shipped. On drift: `python -m gpunode.knowledge.kernelsms` rewrites it. Slow and needs
https://pypi.org: marked `slow`; without PyPI it skips, and fails under CI=true. Measured on the
2-core lab machine: about 2.5 minutes to read the nine wheels once they are cached.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpunode.knowledge import kernelsms

pytestmark = pytest.mark.slow

CACHE = Path(os.environ.get("GPUNODE_WHEEL_CACHE") or Path.home() / ".cache" / "gpunode" / "kernel-wheels")
OFFLINE = ("NewConnectionError", "Failed to establish", "Temporary failure in name resolution",
           "Network is unreachable", "ConnectTimeout", "Read timed out")


def test_kernel_sms_yml_is_what_the_wheels_hold():
    CACHE.mkdir(parents=True, exist_ok=True)
    try:
        derived = kernelsms.render(kernelsms.table(CACHE))
    except subprocess.CalledProcessError as exc:
        if any(word in exc.stderr for word in OFFLINE) and os.environ.get("CI") != "true":
            pytest.skip(f"PyPI unreachable: {exc.stderr.strip().splitlines()[-1]}")
        raise
    assert derived == kernelsms.FILE.read_text(), "stale: run `python -m gpunode.knowledge.kernelsms`"


def test_every_pinned_kernel_and_machine_is_recorded():
    recorded = kernelsms.table_recorded()
    assert sorted((p, v, m) for p, vs in recorded.items() for v, ms in vs.items() for m in ms) == kernelsms.wanted()
