"""The judge's verdicts kept as derived data: plan digest -> what the pin set's sglang said.

Judging every plan needs each pin set's judge environment (GBs from PyPI, minutes to build); the
plans change far less often than the tests run. So each verdict the judge gives is recorded, per
pin set, in compat/derived/verdicts/<pinset>.json, and tests/test_sglang_judge.py re-judges only:
- the plans whose digest is not recorded (a changed resolver, GPU report or model config), and
- every plan of a pin set whose lock packages or judge code changed since the record was written
  (then a recorded verdict the judge now answers differently fails the test as stale).

A verdict is only as good as the judge that gave it, so a record holds the digest of what decides
verdicts: the lock packages the environment is built from and the judge's own code (child.py and
the nodecheck.py it runs sglang's checks with, env.py, __init__.py: stand-ins, stubs, the base
torch). Its `seal` is a digest over those and every verdict: a record edited by hand (a verdict
changed, one added) no longer matches its seal, and the test refuses it.

A plan's digest covers what the judge is given: the engine's arguments (the model folder's place
left out), every file of the model config folder, and the GPU the device queries answer with.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpunode.judge import Case, Verdict
from gpunode.judge.derive import PICKED
from gpunode.judge.env import CHILD, PYTHON, lock_packages, split

FOLDER = Path(__file__).resolve().parents[1] / "compat" / "derived" / "verdicts"
SCHEMA = "gpunode.judge-verdicts/1"
# What decides a verdict besides the lock: the code that builds the environment and runs sglang.
JUDGE_CODE = (CHILD, CHILD.with_name("nodecheck.py"), CHILD.with_name("env.py"), CHILD.with_name("__init__.py"))
# What a recorded verdict keeps of what SGLang resolved: what the derived choices read back.
KEPT = PICKED
MODEL = "<model>"
RECORD_COMMAND = "inv kb.verdicts"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def code_digest(source: str) -> str:
    """The digest of a Python file's code: its syntax tree less docstrings (comments are not in it),
    so that a change to the judge's words alone keeps the records current, and any other does not."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return _sha(ast.dump(tree, include_attributes=False).encode())


def judge_digest() -> str:
    return _sha("".join(f"{p.name}\0{code_digest(p.read_text())}\0" for p in JUDGE_CODE).encode())


def lock_digest(lock: Path) -> str:
    """The packages a judge environment is built from (and the stand-ins), for this Python."""
    wanted, stand = split(lock_packages(lock))
    return _sha(json.dumps({"python": PYTHON, "install": wanted, "stand_ins": stand}).encode())


def _folder_digest(folder: Path, _cache: dict[tuple, str] = {}) -> str:  # noqa: B006 (a cache on purpose)
    files = sorted(q for q in folder.rglob("*") if q.is_file())
    key = tuple((str(q), q.stat().st_mtime_ns, q.stat().st_size) for q in files)
    if key not in _cache:
        h = hashlib.sha256()
        for p in files:
            h.update(str(p.relative_to(folder)).encode() + b"\0" + p.read_bytes() + b"\0")
        _cache[key] = h.hexdigest()
    return _cache[key]


def case_digest(case: Case) -> str:
    argv = [MODEL if a == os.path.abspath(case.model_dir) else a for a in case.argv()]
    return _sha(json.dumps({"argv": argv, "model": _folder_digest(Path(case.model_dir)),
                            "gpu": case.gpu.as_json()}, sort_keys=True).encode())


def _keep(v: Verdict, case: Case) -> dict[str, Any]:
    """A verdict as the record keeps it: the model folder's place replaced (it differs by checkout)."""
    if v.accepted:
        return {"accepted": True, "resolved": {k: v.resolved[k] for k in KEPT if v.resolved.get(k) is not None}}
    place = os.path.abspath(case.model_dir)
    return {"accepted": v.accepted, "error": v.error.replace(place, MODEL), "where": v.where}


def _verdict(kept: dict[str, Any], case: Case) -> Verdict:
    place = os.path.abspath(case.model_dir)
    return Verdict(case.id, kept["accepted"], kept.get("error", "").replace(MODEL, place), kept.get("where", ""),
                   dict(kept.get("resolved") or {}))


@dataclass
class Record:
    pinset: str
    lock: str = ""
    judge: str = ""
    verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)
    seal: str = ""

    def sealed(self) -> str:
        body = json.dumps({"schema": SCHEMA, "pinset": self.pinset, "lock": self.lock, "judge": self.judge,
                           "verdicts": self.verdicts}, sort_keys=True)
        return _sha(body.encode())

    def render(self) -> str:
        head = {"schema": SCHEMA, "note": f"written by the judge ({RECORD_COMMAND}, gpunode/judge/record.py): "
                "do not edit by hand, a changed verdict no longer matches the seal",
                "pinset": self.pinset, "lock": self.lock, "judge": self.judge, "seal": self.sealed()}
        lines = [json.dumps(head, sort_keys=True)[:-1] + ', "verdicts": {']
        items = sorted(self.verdicts.items())
        lines += [f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}{',' if n < len(items) - 1 else ''}"
                  for n, (k, v) in enumerate(items)]
        return "\n".join(lines) + "\n}}\n"


def path(pinset: str, folder: Path = FOLDER) -> Path:
    return folder / f"{pinset}.json"


def load(pinset: str, folder: Path = FOLDER) -> Record:
    p = path(pinset, folder)
    if not p.exists():
        return Record(pinset)
    d = json.loads(p.read_text())
    return Record(d["pinset"], d.get("lock", ""), d.get("judge", ""), d.get("verdicts") or {}, d.get("seal", ""))


def write(record: Record, folder: Path = FOLDER) -> Path:
    p = path(record.pinset, folder)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(record.render())
    tmp.replace(p)
    return p


@dataclass
class Lookup:
    """What the record answers for a list of cases, and what must go to the judge."""
    record: Record
    current: bool                     # written from today's lock packages and judge code
    found: dict[str, Verdict]         # case id -> recorded verdict (only when current)
    missing: list[Case]               # to judge: not recorded, or the record is not current
    digests: dict[str, str]           # case id -> digest


def lookup(pinset: str, lock: Path, cases: list[Case], folder: Path = FOLDER) -> Lookup:
    """Raises ValueError when the record does not match its seal (not produced by the judge)."""
    rec = load(pinset, folder)
    if (rec.seal or rec.verdicts) and rec.seal != rec.sealed():
        raise ValueError(f"{path(pinset, folder)} does not match its seal: it was not written by the judge "
                         f"(edited by hand?); re-record it with `{RECORD_COMMAND} --pinset {pinset}`")
    current = bool(rec.seal) and rec.lock == lock_digest(lock) and rec.judge == judge_digest()
    digests = {c.id: case_digest(c) for c in cases}
    found: dict[str, Verdict] = {}
    missing: list[Case] = []
    for c in cases:
        kept = rec.verdicts.get(digests[c.id]) if current else None
        if kept is None:
            missing.append(c)
        else:
            found[c.id] = _verdict(kept, c)
    return Lookup(rec, current, found, missing, digests)


def stale(got: Lookup, cases: list[Case], fresh: list[Verdict]) -> list[str]:
    """The recorded verdicts (of a record no longer current) that the judge now answers differently."""
    by_id = {c.id: c for c in cases}
    out = []
    for v in fresh:
        old = got.record.verdicts.get(got.digests[v.id])
        new = _keep(v, by_id[v.id])
        if old is not None and old != new:
            out.append(f"{v.id}: recorded {old}, the judge says now {new}")
    return out


def update(got: Lookup, cases: list[Case], fresh: list[Verdict], lock: Path, start: bool = False) -> Record:
    """The record with `fresh` verdicts added (a record that was not current, or `start`, begins empty)."""
    by_id = {c.id: c for c in cases}
    rec = got.record
    base = {} if start or not got.current else dict(rec.verdicts)
    for v in fresh:
        if v.accepted is not None:      # the judge could not run it: nothing to record
            base[got.digests[v.id]] = _keep(v, by_id[v.id])
    out = Record(rec.pinset, lock_digest(lock), judge_digest(), base)
    out.seal = out.sealed()
    return out


def judge_kept(env: Any, pinset: str, lock: Path, cases: list[Case], folder: Path = FOLDER,
               log: Any = print) -> list[Verdict]:
    """One verdict per case: the current record's where it holds one, the judge's for the rest, which are
    added to the record (nothing else of it changes; a record that is not current starts afresh). What
    `inv kb.refresh` derives its choices with: the derived cases are the judge's test's too, so neither
    judges a case the other recorded."""
    from gpunode.judge import judge

    got = lookup(pinset, lock, cases, folder)
    fresh = judge(env, got.missing) if got.missing else []
    log(f"kb.refresh: {pinset}: {len(cases) - len(got.missing)} verdicts from {path(pinset, folder).name}, "
        f"{len(got.missing)} judged")
    if fresh:
        write(update(got, cases, fresh, lock), folder)
    by_id = {**got.found, **{v.id: v for v in fresh}}
    return [by_id[c.id] for c in cases]
