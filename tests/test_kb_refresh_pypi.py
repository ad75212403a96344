"""`inv kb.refresh --propose` against the real PyPI: the proposal for sglang's newest release resolves.

If a release newer than every pin set is out, it is proposed and locked for x86_64 / Python 3.12 with uv
(the lock's own command, gpunode/knowledge/pinlocks.py): a proposal that does not lock is not ready for review,
and this test names uv's reason. If the pin sets cover sglang's newest release, that release is
proposed anyway and must pin what its pin set pins by hand, and lock the same way.

Slow and needs https://pypi.org (and uv): marked `slow`; about a minute.
"""

from __future__ import annotations

import time

import pytest

from gpunode.errors import GpunodeError
from gpunode.knowledge import pinlocks, proposal, refresh, releases
from gpunode.resolve import load_kb, pylock

pytestmark = pytest.mark.slow


def test_the_newest_sglang_release_is_covered_or_its_proposal_locks(tmp_path, capsys):
    kb = load_kb()
    projects = {name: releases.project(name) for name in refresh.watched(kb)}
    new = refresh.uncovered(kb, projects["sglang"])
    version = new.version if new else projects["sglang"].newest().version
    made = refresh.make(kb, projects, version, today=time.strftime("%Y-%m-%d"))
    if new is None:     # covered: the proposal must be what was pinned by hand
        hand = next(p for p in kb.pinsets if p.engine == "sglang" and p.version == version)
        for req in made.pins().values():
            assert req in [x.req for x in hand.packages], f"{req} is not what pin set {hand.id} pins"
        assert made.entry["glibc_min"] == hand.glibc_min
    file, _, _ = refresh.write(kb, made, command="tests/test_kb_refresh_pypi.py", folder=tmp_path, lock=False)
    pinset = refresh.as_pinset(kb, made, file)
    target = pylock.Target("x86_64", "3.12", pinset.glibc_min or "2.17")
    try:
        lock = pinlocks.make(kb, pinset, target, command="tests/test_kb_refresh_pypi.py", root=tmp_path / "locks")
    except GpunodeError as exc:
        pytest.fail(f"the proposal for sglang {version} does not lock: {exc}")
    assert lock.version("sglang") == version
    assert lock.version("torch") == made.entry["torch"]["version"]
    with capsys.disabled():
        print(f"\nsglang {version} ({'new' if new else 'covered'}): {len(lock.packages)} packages locked; "
              + "; ".join(proposal.changes(made) + refresh.lock_changes(kb, made, [lock])))
