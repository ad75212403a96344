"""The CPU time (user + sys, from wait4) of whole commands, this checkout against another, alternated.

    .venv/bin/python bench/startup_cpu.py --before /tmp/before [--ct 200] [--inventory inventory] [--repeat 9]

A no-op `provision` and a `status --sample 0` on a lab container (provisioned already), and `python -c pass`:
on the shared 2-core machine wall times move by 2x with the load, CPU time far less (issue 45). Bytecode is
written by an untimed first run of each; the other checkout runs with its src/ and lab/ first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def env(before: Path | None) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if before is not None:
        e["PYTHONPATH"] = os.pathsep.join([str(before / "src"), str(before / "lab")])
    return e


def run(argv: list[str], e: dict[str, str]) -> tuple[float, float]:
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=e, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({status})")
    return usage.ru_utime + usage.ru_stime, time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--ct", default="200")
    ap.add_argument("--inventory", type=Path, default=REPO / "inventory")
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    gpunode = str(Path(sys.executable).with_name("gpunode"))
    where = ["--host", "lab", "--ct", str(args.ct), "-i", str(args.inventory.resolve())]
    cases = {"provision no-op": [gpunode, "provision", *where],
             "status --sample 0": [gpunode, "status", *where, "--sample", "0"],
             "python -c pass": [sys.executable, "-c", "pass"]}
    for name, argv in cases.items():
        trees = {"after": None} if name == "python -c pass" else {"after": None, "before": args.before.resolve()}
        for tree in trees.values():
            run(argv, env(tree))
        cpu: dict[str, list[float]] = {k: [] for k in trees}
        wall: dict[str, list[float]] = {k: [] for k in trees}
        for _ in range(args.repeat):
            for label, tree in trees.items():
                c, w = run(argv, env(tree))
                cpu[label].append(c)
                wall[label].append(w)
        cells = [f"{k}: CPU {statistics.median(cpu[k]) * 1000:.0f} ms, wall {statistics.median(wall[k]) * 1000:.0f} ms"
                 for k in trees]
        if "before" in trees:
            cells.append(f"before/after CPU {statistics.median(cpu['before']) / statistics.median(cpu['after']):.2f}x")
        print(f"{name:18s} " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
