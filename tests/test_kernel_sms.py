"""compat/kernel_sms.yml is what the pinned wheels hold: re-derived from the released wheels where
the record of what it was read from does not cover today's locks.

compat/derived/kernel_sms-read.json (written by the reader, gpunode.knowledge.kernelsms) names the
wheel and sha256 each entry was read from and the digest of the reader's code, sealed over those and
the bytes of kernel_sms.yml. A wheel's sha256 names its bytes and the reader is deterministic, so an
entry whose wheel the locks (compat/locks) still pin at that sha256, read by today's reader, is what
reading the wheel again would give: it is not downloaded. Every other entry (a lock or pin set
changed, the reader changed) is read again: the wheel is downloaded from PyPI (`pip download
--no-deps`, cached under $GPUNODE_WHEEL_CACHE or ~/.cache/gpunode/kernel-wheels), read by
gpunode.knowledge.fatbin, and the rendered file and record must be byte for byte the ones shipped.
A record that does not match its seal (edited by hand) fails. GPUNODE_KERNEL_SMS_REREAD=1 reads
every wheel again (about 2.2 GB, 2.5 minutes on the 2-core lab machine once cached). On drift:
`python -m gpunode.knowledge.kernelsms` rewrites both. Reading needs https://pypi.org: marked `slow`;
without PyPI it skips, and fails under CI=true.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from gpunode.errors import GpunodeError
from gpunode.knowledge import kernelsms

pytestmark = pytest.mark.slow

OFFLINE = ("NewConnectionError", "Failed to establish", "Temporary failure in name resolution",
           "Network is unreachable", "ConnectTimeout", "Read timed out")
FIX = "run `python -m gpunode.knowledge.kernelsms`"


def test_kernel_sms_yml_is_what_the_wheels_hold():
    text, read = kernelsms.FILE.read_text(), kernelsms.load_read()
    assert kernelsms.sealed(read, text), f"{kernelsms.READ} does not match its seal or kernel_sms.yml: {FIX}"
    again = (kernelsms.wanted() if os.environ.get("GPUNODE_KERNEL_SMS_REREAD") == "1"
             else kernelsms.unread(read, kernelsms.locked()))
    if not again:
        return  # every entry was read by today's reader from the wheel the locks pin: nothing to download
    print(f"reading {len(again)} kernel wheels again: {', '.join(kernelsms.key(*k) for k in again)}")
    cache = kernelsms.cache()
    cache.mkdir(parents=True, exist_ok=True)
    fresh = {kernelsms.key(*k) for k in again}
    wheels = {k: v for k, v in (read.get("wheels") or {}).items() if k not in fresh}
    try:
        derived = kernelsms.render(kernelsms.table(cache, only=again, wheels=wheels))
    except (subprocess.CalledProcessError, GpunodeError) as exc:
        said = getattr(exc, "stderr", None) or getattr(exc, "evidence", "") or ""
        if any(word in said for word in OFFLINE) and os.environ.get("CI") != "true":
            pytest.skip(f"PyPI unreachable: {said.strip().splitlines()[-1]}")
        raise
    assert derived == text, f"stale: {FIX}"
    assert json.loads(kernelsms.render_read(wheels, derived)) == read, f"{kernelsms.READ} is stale: {FIX}"


def test_every_pinned_kernel_and_machine_is_recorded():
    recorded = kernelsms.table_recorded()
    assert sorted((p, v, m) for p, vs in recorded.items() for v, ms in vs.items() for m in ms) == kernelsms.wanted()


def test_each_recorded_wheel_is_the_one_a_lock_pins():
    """The SMs recorded are those of a wheel a lock installs, byte for byte (its sha256). A kernel no
    lock lists is read again on every run instead (kernelsms.unread)."""
    read, locks = kernelsms.load_read(), kernelsms.locked()
    for p, v, m in kernelsms.wanted():
        got, lock = read["wheels"][kernelsms.key(p, v, m)], locks.get(kernelsms.key(p, v, m))
        assert lock is None or lock.get(got["wheel"]) == got["sha256"], (p, v, m)
        assert kernelsms.table_recorded()[p][v][m]["wheel"] == got["wheel"]
