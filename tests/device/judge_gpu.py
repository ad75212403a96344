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
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import serve_proof as sp  # noqa: E402

# A plan sglang 0.5.17 refuses: no_buffer with the overlap schedule on ("no_buffer do not support overlap
# schedule", _validate_mamba_no_buffer); gpunode's own plan adds --disable-overlap-schedule (flags.yml).
REJECTED = ("hybrid", "no_buffer-with-overlap", ["--mamba-radix-cache-strategy", "no_buffer"])

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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    os.environ.update(sp.NO_NVLS)
    args.out.mkdir(parents=True, exist_ok=True)
    t = sp.LocalTransport("h100")
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
