"""inv doctor: which known failure (compat/doctor.yml) applies to a target, and the line that shows it.

    inv doctor --host lab --ct 200                     # read the target in one round trip
    inv doctor --group lab --json                      # every target; one gpunode.doctor/1 document
    inv doctor --host lab --ct 200 --save snap/        # ... and keep what was read
    inv doctor --facts snap/ --journal unit.log        # offline: a snapshot and/or a journal file

Exit 0: no entry applies; 1: at least one does; 2: bad input, or a target could not be read.
"""

from __future__ import annotations

from gpunode.cli.common import task

HELP = {
    "host": "inventory host (a Proxmox host, or a plain SSH host)",
    "ct": "container vmid on that host (omit for a plain SSH host)",
    "group": "examine every target of an inventory group, in parallel",
    "json": "print one JSON document (schema gpunode.doctor/1, docs/doctor.md) on stdout",
    "inventory": "inventory folder or file (default: $GPUNODE_INVENTORY, gpunode.yaml's inventory:, ./inventory)",
    "set": "override a variable: -e key=value, or -e @vars.yml (a YAML file of them); repeatable",
    "limit": "only the targets matching this pattern (Ansible's): kpro*:!kpro6/202; hosts, host/vmid, groups",
    "forks": "how many targets are read at once with --group (default 4)",
    "facts": "offline: a snapshot folder (inv facts --save or inv doctor --save) instead of a target",
    "journal": "offline: a file of journal lines (journalctl -u 'gpunode*' > FILE), alone or with --facts",
    "save": "also write what was read to this folder (one target), to replay with --facts",
}


@task(iterable=["set_"], help=HELP)
def doctor(c, host=None, ct=None, group=None, json=False, inventory=None, set_=None, forks=None,
           facts=None, journal=None, save=None, limit=None):
    """Name the known failures that apply to a target: symptom, cause, fix, source, and the evidence line."""
    # Imports inside (here and below): `inv --list` and other tasks do not pay for doctor's.
    from invoke import Exit

    from gpunode.errors import InventoryError

    if facts or journal:
        if host or ct or group or save or limit:
            raise InventoryError("--facts/--journal read saved evidence; they do not go with --host, --ct, "
                                 "--group or --save", hint="drop the target options to replay offline")
        results = _offline(facts, journal)
    else:
        results = _live(host, ct, group, inventory, set_, forks, save, limit)
    _print(results, json)
    if any(r.error for r in results):
        raise Exit(code=2)
    if any(r.findings for r in results):
        raise Exit(code=1)


def _offline(facts: str | None, journal: str | None):
    from pathlib import Path

    from gpunode.doctor.detect import diagnose
    from gpunode.doctor.gather import evidence, read_journal
    from gpunode.doctor.report import TargetResult
    from gpunode.facts import snapshot
    from gpunode.facts.snapshot import RawFacts

    lines = read_journal(Path(journal)) if journal else []
    raw = snapshot.load(Path(facts)) if facts else RawFacts(target=Path(str(journal)).name)
    ev = evidence(raw, lines)
    return [TargetResult(raw.target, ev, diagnose(ev), gathered_at=raw.gathered_at, duration_s=raw.duration_s)]


def _live(host, ct, group, inventory, set_, forks, save, limit):
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    from gpunode.cli.common import forks_of, load_inventory, parse_sets, select_targets
    from gpunode.cli.session import Session
    from gpunode.errors import GpunodeError, InventoryError
    from gpunode.facts import snapshot

    forks = forks_of(forks, 4)
    targets = select_targets(load_inventory(inventory), host, ct, group, parse_sets(set_), limit)
    if save and len(targets) != 1:
        raise InventoryError(f"--save takes one target; the selection has {len(targets)}",
                             hint="use --host H --ct N with --save, one folder per target")
    raws: dict[str, object] = {}

    def one(target):
        from gpunode.doctor.detect import diagnose
        from gpunode.doctor.gather import collect, evidence
        from gpunode.doctor.report import TargetResult

        try:
            raw = collect(session.transport(target), venv=target.vars.get("venv"))
            raws[target.name] = raw
            ev = evidence(raw)
            return TargetResult(target.name, ev, diagnose(ev), gathered_at=raw.gathered_at,
                                duration_s=raw.duration_s)
        except GpunodeError as exc:
            return TargetResult(target.name, error=str(exc))

    with Session() as session, ThreadPoolExecutor(max_workers=min(forks, len(targets))) as pool:
        results = list(pool.map(one, targets))
    if save and targets[0].name in raws:
        snapshot.save(raws[targets[0].name], Path(save))  # type: ignore[arg-type]
    return results


def _print(results, as_json: bool) -> None:
    import json

    from gpunode.doctor.report import document, text
    from gpunode.engine.runner import new_run_id
    from gpunode.secrets import redact

    if as_json:
        print(redact(json.dumps(document(results, new_run_id()), indent=2)))
    else:
        print(redact("\n".join(text(r) for r in results)))


ns = doctor
