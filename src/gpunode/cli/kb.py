"""inv kb.refresh: re-derive what each pin set's own sglang picks (gpunode/judge/derive.py).

    inv kb.refresh                     # every SGLang pin set; writes compat/derived/sglang-choices.yml
    inv kb.refresh --pinset cu13-b --check   # print what would change, write nothing

Run from a checkout: the reference model configs are tests/data/models. The first run builds the
judge environments (several GB, from PyPI); later runs reuse them.
"""

from __future__ import annotations

from pathlib import Path

from invoke import Collection

from gpunode.cli.common import task
from gpunode.errors import CommandError, InventoryError

HELP = {
    "pinset": "only this SGLang pin set (id from gpunode/compat/pinsets.yml); repeatable",
    "check": "print what would change and write nothing (exit 1 when something would)",
    "models": "the folder of reference model configs (default: tests/data/models of this checkout)",
}


@task(help=HELP, iterable=["pinset"])
def refresh(c, pinset=None, check=False, models=None):
    """Ask each pin set's sglang what it picks by itself, per architecture and GPU, and keep it as data."""
    from gpunode import pinlocks
    from gpunode.judge import derive
    from gpunode.judge.env import build, lock_file
    from gpunode.resolve import load_kb

    kb = load_kb()
    sglang = [p for p in kb.pinsets if p.engine == "sglang"]
    for pid in pinset or ():
        if pid not in {p.id for p in sglang}:
            raise InventoryError(f"unknown SGLang pin set {pid!r}",
                                 hint=f"SGLang pin sets: {', '.join(p.id for p in sglang)}")
    folder = Path(models) if models else Path(__file__).resolve().parents[3] / "tests" / "data" / "models"
    if not folder.is_dir():
        raise InventoryError(f"no folder of reference model configs at {folder}",
                             hint="run from a gpunode checkout, or pass --models FOLDER (one config.json per folder)")
    refs = derive.references(folder)
    envs = {}
    for p in sglang:
        if pinset and p.id not in pinset:
            continue
        # a pin set without a lock for this Python is judged with a locked pin set of the same sglang
        locked = [q.id for q in sglang if q.version == p.version and lock_file(pinlocks.ROOT, q.id).exists()]
        envs[p.id] = (p.version, build(locked[0] if locked else p.id, pinlocks.ROOT), derive.kb_choices(kb, p),
                      derive.reference_gpus(p.torch_cuda or "13.0"))
    new = derive.refresh(envs, refs)
    old = derive.load()
    if pinset:     # keep the pin sets not asked for as they were
        new["pinsets"] = {**(old.get("pinsets") or {}), **new["pinsets"]}
    lines = derive.changes(old, new)
    for line in lines:
        print(f"  changed: {line}")
    print(f"kb.refresh: {len(lines)} derived choices changed", flush=True)
    if check:
        if lines:
            raise CommandError(f"{len(lines)} derived choices differ from {derive.FILE.name}", target="localhost",
                               hint="review them and run `inv kb.refresh` to write them")
        return
    derive.FILE.parent.mkdir(parents=True, exist_ok=True)
    tmp = derive.FILE.with_suffix(".tmp")
    tmp.write_text(derive.render(new))
    tmp.replace(derive.FILE)
    print(f"wrote {derive.FILE}")


ns = Collection("kb")
ns.add_task(refresh)
