"""inv kb.refresh: what PyPI has that the pin sets do not (gpunode/knowledge/refresh.py), a proposed pin set
for a new sglang release, and what each pin set's own sglang picks (gpunode/judge/derive.py).

    inv kb.refresh                     # new releases; every SGLang pin set; writes compat/derived/sglang-choices.yml
    inv kb.refresh --propose           # also: compat/proposed/<id>.yml and its locks, for the newest new sglang
    inv kb.refresh --propose --release 0.5.22 --no-derive   # a proposal for that release only
    inv kb.refresh --pinset cu13-b --check   # print what would change, write nothing
    inv kb.verdicts                    # only re-judge every plan and re-record the verdicts (compat/derived/verdicts/)
    inv kb.verdicts --pinset cu13-b    # one pin set's
    inv kb.verdicts --missing          # only the plans the records lack, added to them
    inv kb.refresh --no-judge          # new releases; the pin sets' wheels read into compat/derived/sglang-registry.yml

Run from a checkout: the reference model configs are tests/data/models. The first run builds the
judge environments (several GB, from PyPI); later runs reuse them.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from invoke import Collection

from gpunode.cli.common import task
from gpunode.errors import CommandError, InventoryError

HELP = {
    "pinset": "only this SGLang pin set (id from gpunode/compat/pinsets.yml); repeatable",
    "check": "print what would change and write nothing (exit 1 when something would)",
    "models": "the folder of reference model configs (default: tests/data/models of this checkout)",
    "propose": "write a proposed pin set (and its locks) for the newest sglang release no pin set covers, "
               "to gpunode/compat/proposed/ for review",
    "release": "with --propose: propose for this sglang release instead",
    "derive": "re-derive the data read from each pin set's wheels and what its sglang picks (--no-derive: only read "
              "PyPI and propose)",
    "judge": "with derive: also run each pin set's sglang on the reference configs (--no-judge: read the wheels "
             "only, compat/derived/sglang-registry.yml, in about a minute)",
    "lock": "with --propose: lock the proposal with uv (--no-lock: write the pin set only)",
}


def say(line: str) -> None:
    print(line, flush=True)   # the run takes minutes: each line as it happens, also when piped


@task(help=HELP, iterable=["pinset"])
def refresh(c, pinset=None, check=False, models=None, propose=False, release=None, derive=True, lock=True,
            judge=True):
    """Report new releases on PyPI, propose a pin set for a new sglang, re-derive what each pin set's sglang picks."""
    from gpunode.resolve import load_kb

    kb = load_kb()
    sglang = [p.id for p in kb.pinsets if p.engine == "sglang"]
    for pid in pinset or ():
        if pid not in sglang:
            raise InventoryError(f"unknown SGLang pin set {pid!r}", hint=f"SGLang pin sets: {', '.join(sglang)}")
    if release and not propose:
        raise InventoryError("--release names the sglang release to propose a pin set for",
                             hint="add --propose")
    newer = None
    if propose or not check:
        newer = _releases(kb, propose=propose, release=release, lock=lock)
    if derive:      # the wheels' model registries, model types and quantization floors: every pin set
        _registry(kb, check, newer)
    if derive and judge:
        _derive(kb, pinset, check, models)
        if not check:
            _record(sglang if not pinset else list(pinset))


VERDICTS_HELP = {"pinset": "only this SGLang pin set (id from gpunode/compat/pinsets.yml); repeatable",
                 "missing": "judge only the plans a current record lacks and add them to it (plans no longer "
                            "made stay recorded until a full run)"}
JUDGE_TEST = Path(__file__).resolve().parents[3] / "tests" / "test_sglang_judge.py"


@task(help=VERDICTS_HELP, iterable=["pinset"])
def verdicts(c, pinset=None, missing=False):
    """Re-judge every plan of each SGLang pin set and record the verdicts (compat/derived/verdicts/<pinset>.json)."""
    from gpunode.resolve import load_kb

    sglang = [p.id for p in load_kb().pinsets if p.engine == "sglang"]
    for pid in pinset or ():
        if pid not in sglang:
            raise InventoryError(f"unknown SGLang pin set {pid!r}", hint=f"SGLang pin sets: {', '.join(sglang)}")
    _record(list(pinset) if pinset else sglang, missing=missing)


def _record(pinsets: list[str], missing: bool = False) -> None:
    """The judge's test, in record mode, over these pin sets: its cases are the plans the test judges."""
    if not JUDGE_TEST.exists():
        raise InventoryError(f"no {JUDGE_TEST.name} at {JUDGE_TEST.parent}",
                             hint="run from a gpunode checkout: the plans judged are the test's")
    test = str(JUDGE_TEST)
    ids = [f"{test}::{name}[{pid}]" for pid in pinsets
           for name in ("test_sglang_accepts_every_plan_and_the_derived_choices_are_its_own",
                        "test_sglang_accepts_every_nodes_multi_node_command_line")]
    ids.append(f"{test}::test_the_judge_rejects_what_sglang_rejects")   # cu13-b's; re-recorded with the others
    mode = "missing" if missing else "1"
    say(f"kb.verdicts: judging {'the unrecorded' if missing else 'every'} plan of {', '.join(pinsets)} "
        f"(GPUNODE_JUDGE_RECORD={mode} {JUDGE_TEST.name})")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *ids],
                          cwd=JUDGE_TEST.parents[1], env={**os.environ, "GPUNODE_JUDGE_RECORD": mode})
    if proc.returncode != 0:
        raise CommandError(f"the judge's test ended with {proc.returncode}: the records of the pin sets it reached "
                           "are written, see its failures above", target="localhost",
                           hint="a plan SGLang rejects is the resolver's to fix; the record says what SGLang said")


def _releases(kb, *, propose, release, lock):
    from gpunode.knowledge import refresh, releases

    say("kb.refresh: reading PyPI: " + ", ".join(refresh.watched(kb)))
    projects = {name: releases.project(name) for name in refresh.watched(kb)}
    say("new releases since the pin sets:")
    found = refresh.news(kb, projects)
    for n in found:
        say(f"  {n.line()}")
    newer = [r.version for n in found if n.name == "sglang" for r in n.newer]
    if not propose:
        return newer
    new = refresh.uncovered(kb, projects["sglang"])
    version = release or (new.version if new else None)
    if version is None:
        say("kb.refresh: every sglang release is covered by a pin set: nothing to propose "
            "(--release VERSION proposes for one anyway)")
        return newer
    asked = projects["sglang"].get(version)
    if asked is None:
        newest = [r.version for r in projects["sglang"].final()[-5:]]
        raise InventoryError(f"--release {version}: sglang has no such release on PyPI",
                             hint=f"its newest: {', '.join(newest)}")
    if asked.yanked or asked.prerelease:
        say(f"kb.refresh: note: sglang {version} is {'yanked' if asked.yanked else 'a pre-release'}; proposing anyway")
    today = time.strftime("%Y-%m-%d", time.gmtime())
    made = refresh.make(kb, projects, version, today=today, say=say)
    command = shlex.join(["inv", "kb.refresh", *sys.argv[2:]]) if len(sys.argv) > 2 else "inv kb.refresh --propose"
    file, locks, failed = refresh.write(kb, made, command=command, lock=lock, say=say)
    say(f"proposed pin set {made.id} (copied the rest from {made.template.id}): {file}")
    from gpunode.knowledge import proposal

    for line in proposal.changes(made):
        say(f"  changed: {line}")
    for line in refresh.lock_changes(kb, made, locks):
        say(f"  lock: {line}")
    for note in made.notes:
        say(f"  REVIEW: {note}")
    for why in failed:
        say(f"  NOT locked: {why}")
    if failed:
        raise CommandError(f"proposed pin set {made.id} could not be locked for {len(failed)} target(s)",
                           target="localhost", hint=f"see uv's words above; {file} is written for review, "
                           "and a pin set that cannot be locked is not ready to move into pinsets.yml")
    return newer


def _registry(kb, check, newer):
    """compat/derived/sglang-registry.yml from the wheels; `newer`: the sglang releases on PyPI newer than every
    pin set's (None: not read this run, the file's own list is kept)."""
    from gpunode.knowledge import wheelregistry

    old = wheelregistry.load()
    started = time.monotonic()
    new = wheelregistry.derive(kb, old.get("newer") or () if newer is None else newer, log=say)
    lines = wheelregistry.changes(old, new)
    for line in lines:
        say(f"  changed: {line}")
    say(f"kb.refresh: read {len(new['sglang'])} sglang and {len(new['transformers'])} transformers wheel(s) in "
        f"{time.monotonic() - started:.0f} s; {len(lines)} registry line(s) changed")
    for version, data in new["sglang"].items():
        for line in data.get("unread", ()):
            say(f"  REVIEW: sglang {version}: {line} (not read by code: its architecture is not listed)")
    if check:
        if lines:
            raise CommandError(f"{len(lines)} registry line(s) differ from {wheelregistry.FILE.name}",
                               target="localhost", hint="review them and run `inv kb.refresh` to write them")
        return
    wheelregistry.write(new)
    say(f"wrote {wheelregistry.FILE}")


def _derive(kb, pinset, check, models):
    from gpunode.judge import derive, record
    from gpunode.judge.env import build, lock_file
    from gpunode.resolve import pylock

    sglang = [p for p in kb.pinsets if p.engine == "sglang"]
    folder = Path(models) if models else Path(__file__).resolve().parents[3] / "tests" / "data" / "models"
    if not folder.is_dir():
        raise InventoryError(f"no folder of reference model configs at {folder}",
                             hint="run from a gpunode checkout, or pass --models FOLDER (one config.json per folder)")
    refs = derive.references(folder)
    envs, locks = {}, {}
    for p in sglang:
        if pinset and p.id not in pinset:
            continue
        # a pin set without a lock for this Python is judged with a locked pin set of the same sglang
        locked = [q.id for q in sglang if q.version == p.version and lock_file(pylock.ROOT, q.id).exists()]
        say(f"kb.refresh: judge environment for {p.id} (minutes the first time, cached after)")
        started = time.monotonic()
        locks[p.id] = lock_file(pylock.ROOT, locked[0] if locked else p.id)
        envs[p.id] = (p.version, build(locked[0] if locked else p.id, pylock.ROOT, log=say),
                      derive.kb_choices(kb, p), derive.reference_gpus(p.torch_cuda or "13.0"))
        say(f"kb.refresh: judge environment for {p.id} ready in {time.monotonic() - started:.0f} s")
    started = time.monotonic()
    # the derived cases are the judge test's too: a verdict its record holds is not judged again, and one
    # judged here is recorded (--check writes nothing: it judges every case)
    kept = None if check else (lambda pid, env, cases: record.judge_kept(env, pid, locks[pid], cases, log=say))
    new = derive.refresh(envs, refs, log=say, kept=kept)
    say(f"kb.refresh: derived {len(envs)} pin set(s) in {time.monotonic() - started:.0f} s")
    old = derive.load()
    if pinset:     # keep the pin sets not asked for as they were
        new["pinsets"] = {**(old.get("pinsets") or {}), **new["pinsets"]}
    lines = derive.changes(old, new)
    for line in lines:
        say(f"  changed: {line}")
    say(f"kb.refresh: {len(lines)} derived choices changed")
    if check:
        if lines:
            raise CommandError(f"{len(lines)} derived choices differ from {derive.FILE.name}", target="localhost",
                               hint="review them and run `inv kb.refresh` to write them")
        return
    derive.FILE.parent.mkdir(parents=True, exist_ok=True)
    tmp = derive.FILE.with_suffix(".tmp")
    tmp.write_text(derive.render(new))
    tmp.replace(derive.FILE)
    say(f"wrote {derive.FILE}")


ns = Collection("kb")
ns.add_task(refresh)
ns.add_task(verdicts)
