"""`inv tune`'s search on the lent H100 (issue 47): the tiny hybrid model with MTP weights, SGLang's own flags.

Run by hand on the device machine after serve_proof.py's `models` and `install` calls (tests/device/README.md,
"tune_proof.py"); there is no systemd there, so each candidate's ExecStart is started as serve_proof.py starts
it (serve_proof.Server: the unit's env file, a plain PATH, its WorkingDirectory), Ready is gpunode's own step.

    PYTHONPATH=/root/gpdeps python3 tests/device/tune_proof.py --out /root/out/tune --budget 480

The knobs are gpunode's table (src/gpunode/compat/tune.yml) as `inv tune` reads it for this model, engine
version and GPU: MTP on/off (the model has mtp.* weights), the mamba cache strategy (hybrid), mem_fraction,
--cuda-graph-max-bs. Each candidate is resolved by gpunode (a rule that refuses it is recorded), judged by
the installed SGLang's own argument checks (judge/nodecheck.py, on the real GPU), then started, waited for
Ready, benched with the job's shape at the job's concurrency (gpunode's bench client, the one server), its
GPU memory and start-to-ready recorded, and stopped. The search and the budget are gpunode.tune.search's.
`--table OUT/tune.json` continues a run cut off by the 10-minute call limit: candidates measured there
are kept, the rest are run.

OUT gets tune.json (the table, as `inv tune` saves it, with the device and the date), tune.csv, tune.png
(where the image has matplotlib), the winner written into an inventory's host_vars file as `inv tune`
writes it (host_vars/h100.yml), each candidate's server log excerpt and log.txt.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import serve_proof as sp  # noqa: E402

from gpunode.bench.runner import Spec, bench  # noqa: E402
from gpunode.errors import GpunodeError  # noqa: E402
from gpunode.tune import rules, search  # noqa: E402
from gpunode.tune.check import engine_verdict, refusal  # noqa: E402

MODEL = "tiny-qwen36-mtp"
UNIT = "gpunode-gpu0.service"


def ready(t: sp.LocalTransport, ctx: Any, t0: float, grace_s: float) -> dict[str, Any]:
    step = next(s for rp in sp.roles.build(["servers"], ctx) for s in rp.steps if s.id.startswith("ready:"))
    step.grace_s = int(max(30, min(420, grace_s)))  # a failed start shows through the pid check well before
    try:
        step.apply(t)
        return {"ok": True, "ready_s": round(time.monotonic() - t0, 1)}
    except Exception as e:  # StepError: the evidence is the point
        return {"ok": False, "error": str(e)[-1500:], "s": round(time.monotonic() - t0, 1)}


class ShimBed:
    """search.Bed on the lent machine: one GPU, one server, started by hand instead of by systemd."""

    def __init__(self, t: sp.LocalTransport, out: Path, spec: Spec):
        self.t, self.out, self.spec = t, out, spec
        self.prepared: dict[str, tuple[Any, Any, list[str], dict[str, str], str]] = {}
        self.verdicts: dict[str, dict[str, Any]] = {}

    def prepare(self, overrides: dict[str, Any]) -> tuple[list[str], str]:
        key = json.dumps(overrides, sort_keys=True)
        try:
            facts, v, plan = sp.plan_for(self.t, MODEL, overrides)
        except GpunodeError as e:
            return [], f"gpunode's rules refuse it: {e}"
        ctx = sp.roles.RoleContext(target="h100", vars=v, facts=facts, plan=plan)
        sp.engine_run(self.t, ["weights"], ctx)  # the staged copy: --model-path, which SGLang's checks read
        argv, env, workdir, _ = sp.rendered(ctx)
        args = argv[argv.index("sglang.launch_server") + 1:]
        verdict = engine_verdict(self.t, plan.engine, plan.venv, args, {**env, **sp.NO_NVLS})
        self.verdicts[key] = verdict
        sp.say(f"judge {search.label(overrides)}: accepted={verdict.get('accepted')} "
               f"{str(verdict.get('error') or '')[:200]}")
        self.prepared[key] = (ctx, plan, argv, env, workdir)
        return argv, refusal(verdict)

    def measure(self, cand: search.Candidate, deadline_s: float) -> dict[str, Any]:
        ctx, plan, argv, env, workdir = self.prepared[json.dumps(cand.overrides, sort_keys=True)]
        log = sp.WORK / f"tune-{cand.n}.log"
        log.unlink(missing_ok=True)
        server = sp.Server(argv, env, workdir, log, UNIT)
        t0 = server.start()
        try:
            r = ready(self.t, ctx, t0, deadline_s)
            sp.say(f"{cand.label}: {r}")
            if not r["ok"]:
                oom = " (out of GPU memory)" if sp.out_of_memory(log) else ""
                raise RuntimeError(f"not Ready{oom}: {r['error'][-400:]}")
            doc = bench(self.t, plan, self.spec)
            mem = sp.gpu_memory()
            used = mem.get("used_mib")
            return {**search.figures(doc), "start_to_ready_s": r["ready_s"],
                    "memory_bytes": used * 2**20 if used is not None else None,
                    "memory_what": "GPU memory in use after the bench (nvidia-smi, the whole GPU: this server alone)"}
        finally:
            sp.say(f"{cand.label}: stopped in {server.stop()} s")
            (self.out / f"server-{cand.n}.txt").write_text("\n".join(sp.log_excerpt(log)) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget", type=float, default=480.0, help="seconds for the search (a call has 600)")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--input-len", type=int, default=256)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--knobs", default=None, help="comma-separated knob ids (default: every one that applies)")
    ap.add_argument("--table", type=Path, default=None, help="an earlier run's tune.json to continue")
    args = ap.parse_args()
    sp.machine()
    args.out.mkdir(parents=True, exist_ok=True)
    t = sp.LocalTransport("h100")
    facts, _, plan = sp.plan_for(t, MODEL, {}, args.out / "facts")
    model = rules.model_of(plan, facts)
    knobs = rules.choose(rules.load(), model, args.knobs)
    sp.say(f"{model}: knobs {[k.id for k in knobs]}")
    spec = Spec(concurrency=[args.concurrency], input_len=args.input_len, output_len=args.output_len,
                requests=args.requests, phases=("servers",))
    earlier = search.load(args.table) if args.table and args.table.exists() else None
    bed = ShimBed(t, args.out, spec)
    result = search.search(bed, knobs, concurrency=args.concurrency, budget_s=args.budget, say=sp.say,
                           earlier=earlier)
    smi = sp.sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
    about = {"target": "h100 (lent machine, tests/device/tune_proof.py)", "device": smi["stdout"].strip(),
             "engine": plan.engine, "engine_version": plan.engine_version, "pinset": plan.pinset,
             "model": MODEL, "conditions": model.__dict__, "verdicts": bed.verdicts}
    job = {"concurrency": args.concurrency, "input_len": args.input_len, "output_len": args.output_len,
           "requests": args.requests, "prompts": "random"}
    doc = search.document(result, knobs, about, job)
    (args.out / "tune.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    (args.out / "tune.csv").write_text(search.csv_text(doc))
    why = search.plot(doc, args.out / "tune.png")
    sp.say(why or "plot: tune.png")
    if result.winner is not None:
        try:
            from gpunode.tune import write

            inv = args.out / "inventory"
            (inv / "host_vars").mkdir(parents=True, exist_ok=True)
            (inv / "hosts.yml").write_text("hosts:\n  h100:\n    connection: local\n")
            write.winner(inv, "h100", None, None, result.winner, doc)
            sp.say("winner written: " + (inv / "host_vars" / "h100.yml").read_text().replace("\n", " | "))
        except Exception as e:  # the table is the proof; the write is shown in the lab test too
            sp.say(f"winner not written: {e!r}")
    for row in result.rows:
        sp.say(f"#{row.n} {row.label}: {row.status} {row.output_tok_s} tok/s ready {row.start_to_ready_s} s "
               f"mem {row.memory_bytes} {row.why[:160]}")
    sp.say(f"search {result.search_s} s of {args.budget} s; stopped by budget: {result.stopped_by_budget}; "
           f"winner: {result.winner.label if result.winner else None}")
    (args.out / "log.txt").write_text("\n".join(sp.LOG) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
