"""SGLang itself accepts every plan the resolver makes: each pin set's own parser and argument checks.

For each SGLang pin set, a judge environment holds that release's sglang and its lock's
dependencies (gpunode/judge/env.py; the first build downloads them from PyPI and takes minutes,
later runs reuse ~/.cache/gpunode/judge). Every plan the resolver makes for that pin set, over
each recorded GPU (tests/data/nvidia-smi) x each recorded model config (tests/data/models) x the
variables that change flags, goes through sglang's `prepare_server_args`, whose ServerArgs
__post_init__ runs every cross-flag check of the release. A plan SGLang rejects fails here with
SGLang's own message and the place in sglang that raised it.

What cannot run without a GPU, and so is not judged here: the checks that need the GPU itself
(kernel loading, memory profiling, CUDA graph capture) and anything after ServerArgs
(model loading). child.py says which device queries and kernel packages stand in.

The verdicts are derived data (gpunode/judge/record.py): each pin set's are recorded in
compat/derived/verdicts/<pinset>.json by the judge itself (`inv kb.verdicts`, or
GPUNODE_JUDGE_RECORD=1 on this file). A run judges only the plans whose digest the record lacks, or
every plan of a pin set whose lock packages or judge code changed since (a recorded verdict the
judge now answers differently then fails as stale); a record that does not match its seal fails.
With every plan recorded, no judge environment is built.

Slow and needs PyPI when it judges: marked `slow`; without PyPI it skips, and fails under CI=true.
"""

from __future__ import annotations

import functools
import os
from dataclasses import replace
from pathlib import Path

import pytest

from gpunode.errors import ResolveError
from gpunode.facts.model import parse_model
from gpunode.facts.types import Driver, Facts, Install
from gpunode.judge import Case, Gpu, Verdict, derive, judge, record
from gpunode.judge.env import JudgeEnv, JudgeError, build, lock_file
from gpunode.resolve import resolve
from gpunode.resolve.load import load
from gpunode.resolve.pylock import ROOT as LOCKS
from tests.unit.resolve_facts import KPRO6_CT, smi

pytestmark = pytest.mark.slow

DATA = Path(__file__).parent / "data"
KB = load()
SGLANG = [p for p in KB.pinsets if p.engine == "sglang"]
# Plans known to be rejected today, by pin set and model folder, each with why; strict: an entry that
# no longer fails the judge fails the test until it is removed here.
OPEN: dict[tuple[str, str], str] = {}
# The driver every pin set accepts: the question here is SGLang's checks, not the driver floor.
DRIVER = Driver("580.95.05", "13.0")


# GPUNODE_JUDGE_RECORD=1 (what `inv kb.verdicts` sets): judge every plan and write the records;
# =missing (`inv kb.verdicts --missing`): judge only what a current record lacks and add it there
RECORD = os.environ.get("GPUNODE_JUDGE_RECORD") == "1"
MISSING = os.environ.get("GPUNODE_JUDGE_RECORD") == "missing"
REJECTS_PINSET = "cu13-b"
_recorded: set[str] = set()     # pin sets whose record this session started afresh


def env_pinset(pinset: str) -> str:
    """A pin set without a lock for this Python is judged with the lock of a pin set of the same sglang."""
    p = KB.pinset(pinset)
    same = [q.id for q in SGLANG if q.version == p.version and lock_file(LOCKS, q.id).exists()]
    return same[0] if same else pinset


def env_of(pinset: str) -> JudgeEnv:
    try:
        return build(env_pinset(pinset), LOCKS, log=lambda m: print(m, flush=True))
    except JudgeError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{e} (CI=true: the judge must be buildable here)")
        pytest.skip(str(e))


def judged(pinset: str, cases: list[Case], capsys, prune: bool = True) -> list[Verdict]:
    """One verdict per case: from the pin set's record where it holds today's verdict, else the judge's.
    Recording, the first test of a pin set (`prune`) starts its record afresh: plans no longer made go."""
    lock = lock_file(LOCKS, env_pinset(pinset))
    if not lock.exists():
        env_of(pinset)          # skips (fails under CI) with what is missing
    try:
        got = record.lookup(pinset, lock, cases)
    except ValueError as e:
        pytest.fail(str(e))
    todo = cases if RECORD else got.missing
    fresh = judge(env_of(pinset), todo) if todo else []
    with capsys.disabled():
        print(f"\n[sglang-judge] {pinset}: {len(cases) - len(todo)} verdicts from {record.path(pinset).name}, "
              f"{len(todo)} judged" + ("" if got.current or RECORD else " (the record is not current: its lock "
                                        "packages or the judge's code changed)"))
    if MISSING and fresh:
        record.write(record.update(got, cases, fresh, lock))
    if RECORD:
        changed = record.stale(got, todo, fresh)
        with capsys.disabled():
            print(f"[sglang-judge] {pinset}: {len(changed)} recorded verdicts changed" +
                  "".join(f"\n  {line}" for line in changed[:30]))
        record.write(record.update(got, cases, fresh, lock, start=prune and pinset not in _recorded))
        if prune:
            _recorded.add(pinset)
    else:
        stale = [] if got.current else record.stale(got, todo, fresh)
        assert not stale, f"{record.path(pinset).name} holds verdicts the judge no longer gives (re-record: " \
            f"`{record.RECORD_COMMAND} --pinset {pinset}`):\n  " + "\n  ".join(stale[:15])
        if todo and not MISSING:
            with capsys.disabled():
                print(f"[sglang-judge] {pinset}: {len(todo)} verdicts not recorded; "
                      f"`{record.RECORD_COMMAND} --pinset {pinset}` records them")
    by_id = {**got.found, **{v.id: v for v in fresh}}
    return [by_id[c.id] for c in cases]


def gpu_shapes() -> dict[str, tuple]:
    out = {}
    for folder in sorted((DATA / "nvidia-smi").iterdir()):
        if folder.is_dir():
            try:
                gpus, _ = smi(folder.name)
            except Exception:       # a report gpunode refuses to read is not a plan
                continue
            # a box with MIG on some GPUs: its whole GPUs (a table shows no MIG UUIDs to plan the rest with)
            gpus = tuple(g for g in gpus if g.mig_mode != "Enabled") or gpus
            if gpus:
                out[folder.name] = gpus
    return out


def models() -> dict[str, Path]:
    return {f.name: f for f in sorted((DATA / "models").iterdir()) if (f / "config.json").exists()}


@functools.cache     # parsed once per folder, not once per GPU shape and pin set: it is most of the planning time
def model_facts(folder: Path):
    def text(name: str) -> str | None:
        p = folder / name
        return p.read_text() if p.exists() else None
    return parse_model(f"/dev/shm/{folder.name}", "", text("config.json"), text("model.safetensors.index.json"),
                       text("hf_quant_config.json"), None)


def variables(gpu_cc: str, hybrid: bool) -> list[dict[str, str]]:
    out: list[dict[str, str]] = [{}]
    arch = KB.arch(gpu_cc)
    for b in (arch.attention_allowed if arch else ()):
        out.append({"attention_backend": b})
    if hybrid:
        out += [{"mamba_strategy": s} for s in ("no_buffer", "extra_buffer")]
    return out


def cases_for(pinset: str) -> tuple[list[Case], dict[str, str], int]:
    """(cases, case id -> how the plan was made, refusals)."""
    cases: dict[tuple, Case] = {}
    how: dict[str, str] = {}
    refused = 0
    p = KB.pinset(pinset)
    for shape, gpus in gpu_shapes().items():
        for name, folder in models().items():
            model = model_facts(folder)
            facts = Facts(f"judge/{shape}", gpus, DRIVER, KPRO6_CT, Install(), model)
            for extra in variables(gpus[0].compute_cap, model.hybrid_linear_attention):
                try:
                    plan = resolve(facts, {"pinset": pinset, **extra})
                except ResolveError:
                    refused += 1
                    continue
                s = plan.servers[0]
                first = next(g for g in gpus if g.index in s.gpus) if s.gpus else gpus[0]
                gpu = Gpu(first.compute_cap, first.name, first.memory_mib or 81559,
                          max(1, len(s.gpus)), p.torch_cuda or "13.0")
                key = (s.args, str(folder), gpu)
                if key in cases:
                    continue
                cid = f"{shape}/{name}/{'+'.join(f'{k}={v}' for k, v in extra.items()) or 'default'}"
                cases[key] = Case(cid, s.args, str(folder), gpu)
                how[cid] = " ".join(s.args)
    return list(cases.values()), how, refused


def report(v: Verdict, how: str) -> str:
    return f"{v.id}: sglang rejects `{how}`:\n      {v.error} [{v.where}]"


@pytest.mark.parametrize("pinset", [p.id for p in SGLANG])
def test_sglang_accepts_every_plan_and_the_derived_choices_are_its_own(pinset: str, capsys):
    """One judge run per pin set: every plan, and the cases `inv kb.refresh` derives its data from."""
    cases, how, refused = cases_for(pinset)
    assert cases, "the resolver made no plan for this pin set: the test checked nothing"
    p = KB.pinset(pinset)
    refs = derive.references(DATA / "models")
    derived = derive.derive_cases(refs, derive.reference_gpus(p.torch_cuda or "13.0"), derive.kb_choices(KB, p))
    verdicts = judged(pinset, cases + derived, capsys)
    plans, rederived = verdicts[:len(cases)], derive.collect(derived, verdicts[len(cases):])
    broken = [v for v in verdicts if v.accepted is None]
    known = {m for (pid, m) in OPEN if pid == pinset}
    rejected = [v for v in plans if v.accepted is False and v.id.split("/")[1] not in known]
    fixed = sorted(known - {v.id.split("/")[1] for v in plans if v.accepted is False})
    recorded = (derive.load().get("pinsets", {}).get(pinset) or {}).get("choices") or {}
    drift = derive.changes({"pinsets": {pinset: {"choices": recorded}}}, {"pinsets": {pinset: {"choices": rederived}}})
    with capsys.disabled():
        print(f"\n[sglang-judge] {pinset} (sglang {p.version}): {len(cases)} distinct plans judged, {len(rejected)} "
              f"rejected, {len(broken)} not runnable; {refused} refused by the resolver; {len(derived)} derived "
              f"cases, {len(drift)} drifted")
    assert not broken, "the judge could not run these cases:\n  " + "\n  ".join(f"{v.id}: {v.error}" for v in broken)
    assert not rejected, f"sglang {p.version} rejects {len(rejected)} plans:\n  " + \
        "\n  ".join(report(v, how[v.id]) for v in rejected[:15])
    assert not fixed, f"OPEN lists {fixed} for {pinset}, but sglang {p.version} accepts their plans now: remove them"
    assert not drift, f"{derive.FILE.name} is not what sglang {p.version} says today (run `inv kb.refresh`):\n  " + \
        "\n  ".join(drift[:15])


def test_the_judge_rejects_what_sglang_rejects(capsys):
    """The plan of the field notes' model before the fix: no_buffer with the overlap schedule on.
    sglang 0.5.17 asserts against it (as a lent H100 showed); 0.5.12.post1 turned overlap off itself."""
    folder = models()["qwen3.6-27b-nvfp4"]
    h100 = Gpu("9.0", "NVIDIA H100 80GB HBM3", 81559, 1, "13.0")
    bad = ("--model-path", "x", "--mamba-radix-cache-strategy", "no_buffer")
    good = (*bad, "--disable-overlap-schedule")
    plain = replace(Case("no_buffer", bad, str(folder), h100))
    v_bad, v_good, v_flag = judged(REJECTS_PINSET, [plain, Case("with-flag", good, str(folder), h100),
                                                    Case("no-such-flag", ("--no-such-flag",), str(folder), h100)],
                                   capsys, prune=False)
    assert v_bad.accepted is False and "no_buffer do not support overlap schedule" in v_bad.error, v_bad
    assert v_good.accepted is True, v_good
    assert v_good.resolved["disable_overlap_schedule"] is True
    assert v_flag.accepted is False and "--no-such-flag" in v_flag.error and v_flag.where == "argument parser"


@pytest.mark.parametrize("pinset", [p.id for p in SGLANG])
def test_sglang_accepts_every_nodes_multi_node_command_line(pinset: str, capsys):
    """The multi-node plans of tests/unit/test_resolve_multinode.py (tensor and pipeline parallel), each
    node's own command line given to the pin set's prepare_server_args, with that node's GPUs."""
    from gpunode.resolve.multinode import resolve_group
    from tests.test_wheel_flags import multinode_groups

    p = KB.pinset(pinset)
    cases, refused = [], []
    for name, members, variables in multinode_groups():
        try:
            plans = resolve_group(members, {"pinset": pinset, **variables})
        except ResolveError as exc:
            refused.append(f"{name}: {exc.message[:120]}")
            continue
        folder = models()[Path(plans[0].model.path).name]
        for m, plan in zip(members, plans, strict=True):
            s = plan.servers[0]
            g = m.facts.gpus[0]
            gpu = Gpu(g.compute_cap, g.name, g.memory_mib or 81559, len(s.gpus), p.torch_cuda or "13.0")
            cases.append(Case(f"{pinset}/{name}/{plan.target}", s.args, str(folder), gpu))
    assert cases, f"no multi-node plan resolved for {pinset}: {refused}"
    verdicts = judged(pinset, cases, capsys)
    bad = [f"{v.id}: {v.error} [{v.where}]" for v in verdicts if v.accepted is not True]
    with capsys.disabled():
        print(f"\n[sglang-judge] {pinset}: {len(cases)} node command lines judged, {len(bad)} rejected; "
              f"refused by the resolver: {refused or 'none'}")
    assert not bad, f"sglang {p.version} rejects:\n  " + "\n  ".join(bad)
