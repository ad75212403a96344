"""The pin sets' full locks (gpunode/compat/locks/) against pinsets.yml, and the venv step installing from one.

Offline: this reads the committed locks. Whether a lock still installs from
PyPI is tests/test_pinsets.py's (slow, network).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpunode.knowledge import pinlocks
from gpunode.resolve import pylock
from gpunode.resolve.load import load
from gpunode.steps.base import Change, NoChange, Probe
from gpunode.steps.venv import Venv

KB = load()
UNLOCKED = pylock.ROOT / "UNLOCKED.md"


def unlocked() -> set[str]:
    """Targets that could not be locked here, each with its reason in UNLOCKED.md ("- cu12-legacy x86_64 3.10: ...")."""
    out = set()
    for line in UNLOCKED.read_text().splitlines():
        if line.startswith("- ") and ":" in line:
            out.add(line[2:].split(":", 1)[0].strip())
    return out


def all_targets():
    return [pytest.param(p, t, id=f"{p.id}-{t.machine}-py{t.python}")
            for p in (*KB.pinsets, *KB.router_pinsets()) for t in pinlocks.targets(p)]


@pytest.mark.parametrize("p, t", all_targets())
def test_each_target_is_locked_and_the_lock_matches_its_pinset(p, t):
    file = pylock.path(p, t)
    key = f"{p.id} {t.machine} {t.python}"
    if not file.is_file():
        assert key in unlocked(), f"{file} is missing: run inv pinsets.lock --pinset {p.id} (or say why in {UNLOCKED})"
        return
    assert key not in unlocked(), f"{key} is locked now: remove it from {UNLOCKED}"
    lock = pylock.read(file)
    assert pinlocks.stale(KB, p, t, lock) == [], f"{file} is stale: run inv pinsets.lock --pinset {p.id}"
    assert f"for python {t.python} on {t.platform}" in lock.text.splitlines()[2]
    assert all(len(h) == 64 for x in lock.packages for h in x.hashes)


def test_a_changed_pin_makes_the_lock_stale():
    p = KB.pinset("cu13-latest")
    t = pinlocks.targets(p)[0]
    lock = pylock.read(pylock.path(p, t))
    moved = dataclasses.replace(p, packages=tuple(dataclasses.replace(x, req="torch==2.14.0") if x.name == "torch"
                                                  else x for x in p.packages))
    why = pinlocks.stale(KB, moved, t, lock)
    assert any("pinsets.yml changed" in w for w in why) and "torch is pinned 2.14.0 but locked 2.14.1" in why


def test_lock_lines_carry_the_wheel_hash():
    p = KB.pinset("cu13-latest")
    lock = pylock.find(p, "x86_64", "3.12")
    assert lock is not None and pylock.find(p, "x86_64", "3.13") is None
    torch = next(line for line in lock.requirements() if line.startswith("torch=="))
    assert torch.startswith("torch==2.14.1 --hash=sha256:") and len(torch.split(":")[1]) == 64


def _venv(tmp_path: Path, locked: list[str], lock: str) -> Venv:
    return Venv(path=str(tmp_path / "v"), requirements=["a==1"], locked=locked, lock=lock, installer="uv")


def _probe(step: Venv, manifest_spec_hash: str, spec: dict) -> Probe:
    import json

    from gpunode.steps.venv import listing_hash
    manifest = json.dumps({"spec_hash": manifest_spec_hash, "spec": spec, "listing": listing_hash(["a", "b"]),
                           "verified_at": "t"})
    return Probe(0, f"@@section python\nversion = 3.11.2\n@@section manifest\n{manifest}\n@@section listing\na\nb\n")


def test_an_unchanged_lock_is_a_no_op_and_a_changed_one_names_what_moved(tmp_path):
    old = _venv(tmp_path, ["a==1 --hash=sha256:" + "1" * 64, "b==2 --hash=sha256:" + "2" * 64], "s/pylock.x.toml@aaaa")
    assert isinstance(old.check(_probe(old, old.spec_hash(), old.spec())), NoChange)
    new = _venv(tmp_path, ["a==1 --hash=sha256:" + "1" * 64, "b==3 --hash=sha256:" + "3" * 64], "s/pylock.x.toml@bbbb")
    out = new.check(_probe(new, old.spec_hash(), old.spec()))
    assert isinstance(out, Change)
    assert "lock s/pylock.x.toml@aaaa -> s/pylock.x.toml@bbbb" in out.summary and "b 2 -> 3" in out.summary
