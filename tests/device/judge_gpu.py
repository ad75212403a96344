"""The node's judge on a real GPU: SGLang's own argument checks on each plan's exact argv (issue 38, item 1).

Run on the lent machine after `serve_proof.py install` (tests/device/README.md):
  python3 judge_gpu.py CASE... --out DIR
For each case of serve_proof.CASES, gpunode's facts and resolver make the plan and the servers role renders
its unit; the engine's arguments are ExecStart's words after `python -m sglang.launch_server`. They go, with
the unit's environment file, to CI's judge child (src/gpunode/judge/child.py) run by the plan's venv python
with no stand-ins: no GPUNODE_JUDGE_STANDINS (so the real sgl_kernel and flashinfer load), the real
torch.cuda and the real nvidia-smi. That is `prepare_server_args` and its post-parse checks
(`ServerArgs.__post_init__` in 0.5.17), as `sglang.launch_server` runs them before it starts anything.
One more case per run is a plan SGLang must refuse: REJECTED below.
Writes DIR/judge.json: each case's verdict, what SGLang resolved, and the seconds it cost (the child's
process start and `import sglang.srt.server_args` once, then each case).

  python3 judge_gpu.py --node CASE... --out DIR
runs gpunode's own step instead, as `inv provision` does on a node (steps/judge.py, first in the servers
role): for each case the servers role's judge step through the engine with the local transport (the engine
judges and the step records its markers), then again (nothing changed: the markers answer, the engine is
not asked); then the servers role whole, with the accepted hybrid plan's unit and env file written first
and NODE_REJECTED's arguments added through `extra_args`: the run must fail in its first probe with SGLang's
message, and every file of /etc/gpunode and the units must be byte for byte as before.
Writes DIR/node.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import serve_proof as sp  # noqa: E402

from gpunode.engine import run_target  # noqa: E402
from gpunode.engine.events import Event  # noqa: E402
from gpunode.engine.role import RolePlan  # noqa: E402
from gpunode.steps.judge import EngineJudge  # noqa: E402

# A plan sglang 0.5.17 refuses: no_buffer with the overlap schedule on ("no_buffer do not support overlap
# schedule", _validate_mamba_no_buffer); gpunode's own plan adds --disable-overlap-schedule (flags.yml).
REJECTED = ("hybrid", "no_buffer-with-overlap", ["--mamba-radix-cache-strategy", "no_buffer"])

# A plan gpunode lets through (extra_args names no flag the plan sets) and sglang 0.5.17 refuses on this GPU
# alone: "TRTLLM MHA backend for prefill is only supported on Blackwell GPUs (SM100)" (server_args.py, after
# _resolved_attention_backends, asking is_sm100_supported() of the real device).
NODE_REJECTED = ("hybrid", ["--prefill-attention-backend", "trtllm_mha"])

# Runs under the plan's venv python: CI's child, its stubs left out, each case timed.
RUNNER = """
import importlib.util, json, sys, time
t0 = time.monotonic()
spec = importlib.util.spec_from_file_location("judge_child", sys.argv[1])
child = importlib.util.module_from_spec(spec)
spec.loader.exec_module(child)
from sglang.srt.server_args import prepare_server_args
print(json.dumps({"import_s": round(time.monotonic() - t0, 2)}), flush=True)
for line in sys.stdin:
    case = json.loads(line)
    t = time.monotonic()
    verdict = child._judge(prepare_server_args, case)
    verdict["s"] = round(time.monotonic() - t, 2)
    print(json.dumps(verdict, default=str), flush=True)
"""


def engine_args(argv: list[str]) -> list[str]:
    i = argv.index("sglang.launch_server")
    return argv[i + 1:]


# The files a refused plan must leave as they were (the lab's test_node_judge_lab.py checks the same).
FILES = ("/etc/gpunode", "/etc/systemd/system")


def files_now() -> dict[str, str]:
    out = {}
    for root in FILES:
        for f in sorted(Path(root).glob("*")):
            if f.is_file() and (root == FILES[0] or f.name.startswith("gpunode-")):
                out[str(f)] = hashlib.sha256(f.read_bytes()).hexdigest()[:16] + f" {f.stat().st_mtime_ns}"
    return out


def run_steps(t, plans) -> dict:
    events: list = []
    t0 = time.monotonic()
    recap = run_target(t, plans, emit=events.append, state_dir="/var/lib/gpunode")
    steps = [{"role": e.role, "step": e.step, "status": e.status, "reason": e.reason, "s": round(e.duration, 2)}
             for e in events if isinstance(e, Event) and e.kind == "step"]
    return {"s": round(time.monotonic() - t0, 2), "ok": recap.ok, "changed": recap.changed, "failed": recap.failed,
            "error": recap.error, "round_trips": recap.round_trips, "rolled_back": recap.rolled_back, "steps": steps}


def judge_only(ctx) -> list:
    return [RolePlan(rp.name, [s for s in rp.steps if isinstance(s, EngineJudge)], {})
            for rp in sp.roles.build(["servers"], ctx) if rp.name == "servers"]


def manifest(plan) -> str:
    """serve_proof.install puts the carried wheels in the venv with pip, not through gpunode's venv step, so the
    venv has no lock manifest; the judge waits for one naming the planned install (nodecheck.pending). Write
    the planned requirements there, saying who wrote it."""
    path = Path(plan.venv) / "gpunode-lock.json"
    if not path.exists():
        path.write_text(json.dumps({"written_by": "tests/device/judge_gpu.py (serve_proof.install's venv)",
                                    "spec": {"packages": [p.requirement for p in plan.packages]}}, indent=1))
    return str(path)


def node(t, names: list[str], out: Path) -> int:
    res: dict = {"cases": [], "refused": None}
    for case in names:
        model, extra = sp.CASES[case]
        facts, v, plan = sp.plan_for(t, model, extra)
        ctx = sp.roles.RoleContext(target="h100", vars=v, facts=facts, plan=plan)
        res["manifest"] = manifest(plan)
        staged = sp.engine_run(t, ["weights"], ctx)
        first, again = run_steps(t, judge_only(ctx)), run_steps(t, judge_only(ctx))
        res["cases"].append({"case": case, "argv": plan.servers[0].argv if plan.servers else [], "weights": staged,
                             "first": first, "again": again})
        sp.say(f"node {case}: first {first['s']} s {[x['reason'] for x in first['steps']]} "
               f"{first['error'] or ''}; again {again['s']} s {[x['status'] for x in again['steps']]}")
    model, extra = sp.CASES[NODE_REJECTED[0]]
    facts, v, plan = sp.plan_for(t, model, extra)
    ctx = sp.roles.RoleContext(target="h100", vars=v, facts=facts, plan=plan)
    sp.engine_run(t, ["weights"], ctx)
    sp.rendered(ctx)  # the accepted plan's unit and env file, as a provisioned node holds them
    before = files_now()
    bad_vars = {**extra, "extra_args": NODE_REJECTED[1]}
    facts, v, plan = sp.plan_for(t, model, bad_vars)
    bad = sp.roles.RoleContext(target="h100", vars=v, facts=facts, plan=plan)
    refused = run_steps(t, sp.roles.build(["servers"], bad))
    refused.update(argv=plan.servers[0].argv, files_before=before, files_after=files_now())
    refused["files_unchanged"] = refused["files_before"] == refused["files_after"]
    res["refused"] = refused
    sp.say(f"node refused: ok={refused['ok']} failed={refused['failed']} changed={refused['changed']} "
           f"{refused['s']} s files unchanged={refused['files_unchanged']} ({len(before)} files)\n"
           f"{refused['error']}")
    (out / "node.json").write_text(json.dumps(res, indent=1, default=str))
    (out / "log.txt").write_text("\n".join(sp.LOG) + "\n")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--node", action="store_true", help="gpunode's own judge step, as provision runs it")
    args = ap.parse_args()
    os.environ.update(sp.NO_NVLS)
    args.out.mkdir(parents=True, exist_ok=True)
    t = sp.LocalTransport("h100")
    if args.node:
        return node(t, args.cases, args.out)
    cases, env, venv = [], {}, ""
    for case in args.cases:
        model, extra = sp.CASES[case]
        facts, v, plan = sp.plan_for(t, model, extra)
        ctx = sp.roles.RoleContext(target="h100", vars=v, facts=facts, plan=plan)
        # The weights role first, as a node runs it: --model-path is the staged copy, and SGLang's checks
        # read its config.json (before staging they refuse: "Repo id must be in the form ...", seen there).
        sp.engine_run(t, ["weights"], ctx)
        argv, env, _, _ = sp.rendered(ctx)
        venv = plan.venv
        cases.append({"id": case, "argv": engine_args(argv)})
        if case == REJECTED[0]:
            cases.append({"id": REJECTED[1], "argv": engine_args(argv) + REJECTED[2]})
    child = sp.REPO / "src" / "gpunode" / "judge" / "child.py"
    run_env = {"PATH": sp.SYSTEMD_PATH, "LANG": "C.UTF-8", **env, **sp.NO_NVLS}
    run_env.pop("GPUNODE_JUDGE_STANDINS", None)
    stdin = "".join(json.dumps(c) + "\n" for c in cases)
    t0 = time.monotonic()
    r = subprocess.run([f"{venv}/bin/python", "-c", RUNNER, str(child)], input=stdin, capture_output=True, text=True,
                       env=run_env, timeout=300)
    total = round(time.monotonic() - t0, 2)
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    res = {"rc": r.returncode, "total_s": total, "import": lines[0] if lines else None, "cases": cases,
           "verdicts": lines[1:], "stderr": r.stderr[-4000:], "env": run_env}
    for vd in res["verdicts"]:
        sp.say(f"judge {vd['id']}: accepted={vd['accepted']} {vd['s']} s {vd['error'][:200]} {vd['where']}")
    sp.say(f"judge: rc={r.returncode} {total} s in all; {res['import']}; {r.stderr[-300:]}")
    (args.out / "judge.json").write_text(json.dumps(res, indent=1, default=str))
    (args.out / "log.txt").write_text("\n".join(sp.LOG) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
