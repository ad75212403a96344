"""Which full lock each venv of the plan installs from (read by pylock.py, made by
gpunode/knowledge/pinlocks.py; docs/locks.md).

The resolver picks it, so that the roles read it from the typed plan: the lock of
the pin set for the target's machine and Python, checked to hold the pin set's
own pins and the packages the fixes add (pip-nvcc). A target without a lock gets
none and the reason; the engine role's engine_lock variable decides whether that
is allowed.
"""

from __future__ import annotations

from gpunode.resolve import pylock
from gpunode.resolve.kb import Pinset
from gpunode.resolve.plan import PlannedLock
from gpunode.resolve.trail import Trail


def planned(p: Pinset, machine: str, python: str, requirements: list[str], trail: Trail, what: str) -> PlannedLock:
    lock = pylock.find(p, machine, python)
    if lock is None:
        why = f"no lock for {machine} python{python} in gpunode/compat/locks/{p.id}/"
        trail.decide(f"{what} lock", "none", f"{why}: the {what} venv installs the pins and lets pip resolve the rest",
                     fact=f"system.arch={machine}, python={python}", source="docs/locks.md")
        return PlannedLock("", unlocked_why=why)
    pins = [r for r in requirements if "==" in r]
    stale = [r for r in pins if lock.version(r.split("==")[0].split("[")[0]) != r.split("==")[1]]
    file = f"{p.id}/{lock.path.name}"
    reqs = tuple(lock.requirements())
    if stale:
        return PlannedLock(file, lock.digest, reqs, stale=f"the lock {lock.path.name} of {p.id} does not hold "
                                                          f"{', '.join(stale)}")
    trail.decide(f"{what} lock", f"{file} ({len(reqs)} packages)",
                 f"every package of the {what} venv's closure at its locked version, with its sha256",
                 fact=f"system.arch={machine}, python={python}", rule=f"gpunode/compat/locks/{file}",
                 source="docs/locks.md")
    return PlannedLock(file, lock.digest, reqs)
