"""What the node's own engine checks cost (steps/judge.py): the judge's probe on a provisioned target.

The servers are taken as they run there (each unit's ExecStart and env file); the markers go to a
scratch folder of this bench (/tmp/gpunode-bench-judge), so the target's own are never touched:
- unchanged: every marker holds its digest (what a no-op's batch runs: shell builtins only);
- judged: no marker (a changed command line): the engine in the venv judges every server;
- refused: the same with --extra ARGS appended, which the engine refuses.

    .venv/bin/python bench/node_judge.py                       # lab container 200 (under the lab lock)
    .venv/bin/python bench/node_judge.py --local --repeat 3    # this machine, a provisioned node
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_target import add_arguments, open_target  # noqa: E402

from gpunode.steps.base import Probe  # noqa: E402
from gpunode.steps.judge import EngineJudge, Judged  # noqa: E402

SCRATCH = "/tmp/gpunode-bench-judge"


def servers(target, names: list[str], extra: list[str]) -> tuple[str, str, list[Judged]]:
    """(engine, venv, servers) from the units and env files on the target."""
    out, engine, venv = [], "", ""
    for name in names:
        unit = target.run(["systemctl", "show", "-P", "ExecStart", f"gpunode-{name}.service"], check=True).stdout
        argv = shlex.split(unit.split("argv[]=", 1)[1].split(" ;", 1)[0])
        venv = argv[0].rsplit("/bin/", 1)[0]
        engine = "sglang" if argv[2].startswith("sglang") else "vllm-cpu" if "cpu" in venv else "vllm"
        text = target.read_file(f"/etc/gpunode/{name}.env").decode()
        env = {k: v.strip('"') for k, v in (line.split("=", 1) for line in text.splitlines() if "=" in line)}
        out.append(Judged(name, (*argv[3:], *extra), tuple(sorted(env.items()))))
    return engine, venv, out


def timed(target, step: EngineJudge) -> tuple[float, str]:
    started = time.monotonic()
    result = target.run(step.probe(), timeout=step.deadline() + 60)
    took = time.monotonic() - started
    try:
        outcome = step.check(Probe(result.exit_code, result.stdout + result.stderr))
        said = getattr(outcome, "summary", "") or getattr(outcome, "reason", "")
    except Exception as exc:  # noqa: BLE001 - a refusal is what the refused case measures
        said = str(exc).splitlines()[0]
    return took, said


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap)
    ap.add_argument("--servers", default="cpu0,cpu1")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each case that asks the engine")
    ap.add_argument("--extra", default="--max-num-batched-tokens 32", help="what the refused case appends")
    args = ap.parse_args()
    target, session = open_target(args)
    try:
        names = args.servers.split(",")
        engine, venv, good = servers(target, names, [])
        _, _, bad = servers(target, names, shlex.split(args.extra))
        expect: list[str] = []   # the venv as it is: judged whatever it holds
        rows = []
        for case, judged, repeat in (("judged", good, args.repeat), ("refused", bad, args.repeat)):
            step = EngineJudge(engine=engine, venv=venv, servers=judged, expect=expect, state=SCRATCH)
            for _ in range(repeat):
                target.run(["rm", "-rf", SCRATCH], check=True)
                rows.append((case, *timed(target, step)))
        step = EngineJudge(engine=engine, venv=venv, servers=good, expect=expect, state=SCRATCH)
        for command in step.commands():
            target.run(list(command.argv), check=True)
        noop = [timed(target, step) for _ in range(5)]
        rows.append(("unchanged", statistics.median(t for t, _ in noop), noop[0][1]))
        target.run(["rm", "-rf", SCRATCH], check=True)
        print(f"{engine} in {venv}, servers {', '.join(names)} ({len(names)} judged side by side)")
        for case, took, said in rows:
            print(f"  {case:<9} {took:7.2f} s  {said[:150]}")
    finally:
        if session is not None:
            session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
