"""Staging vs plain `cp -r` of the same folders into /dev/shm, as ratios, from one run.

    python bench/staging.py                      # lab container 200, 2 GiB in 8 shards
    python bench/staging.py --local --gib 1      # this machine
    python bench/staging.py --local --script OLD.sh   # another version (git show REV:src/gpunode/...)

Two folders: the model's shards (--gib in --shards files) and a folder of --small-files
small files (1-8 KiB, in 10 subfolders: a tokenizer's or a code model's many files), where
the cost per file shows. Each is made once, then read once so that every copy starts with it
in the page cache, and is copied into /dev/shm on the same target by `cp -r` and by the real
stage-weights.sh (resumable, verified, manifest, progress); then stage-weights.sh runs again
over its own complete copy (the re-run a boot or a no-op provision does). cp and staging
alternate for --rounds rounds and the medians are compared, so that a busy neighbour slows
both alike. Each line gives the median time and its ratio to cp's (cp time / this time: above
1 is faster than cp).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from gpunode.steps import render

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import bench_target  # noqa: E402  (beside this script)

WORK = "/var/tmp/gpunode-bench"
SRC = f"{WORK}/model"
SMALL = f"{WORK}/small"
SCRIPT = f"{WORK}/stage-weights.sh"

# The two folders' makers, run on the target with sh (their arguments are described in each)
_SHARDS = Path(__file__).with_name("staging-shards.sh").read_text()
_SMALL = Path(__file__).with_name("staging-small.sh").read_text()


def timed(t, argv) -> float:
    start = time.perf_counter()
    t.run(argv, check=True, timeout=3600)
    return time.perf_counter() - start


def _round(t, src: str, name: str, times: dict[str, list[float]]) -> None:
    cp_dest, stage_dest = f"/dev/shm/bench-cp-{name}", f"/dev/shm/bench-stage-{name}"
    times["cp"].append(timed(t, ["cp", "-r", src, cp_dest]))
    t.run(["rm", "-rf", cp_dest], check=True)
    times["stage"].append(timed(t, ["sh", SCRIPT, src, stage_dest]))
    times["rerun"].append(timed(t, ["sh", SCRIPT, src, stage_dest]))
    t.run(["rm", "-rf", stage_dest], check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_target.add_arguments(ap)
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--small-files", type=int, default=1000)
    ap.add_argument("--script", help="stage-weights.sh to bench (default: this checkout's)")
    ap.add_argument("--rounds", type=int, default=5, help="alternating cp/staging rounds; medians are compared")
    args = ap.parse_args()

    t, session = bench_target.open_target(args)
    shard_mib = int(args.gib * 1024 / args.shards)
    default = render.find("weights/stage-weights.sh")
    script = (Path(args.script) if args.script else default).read_text()
    t.write_file(SCRIPT, script.encode(), mode=0o755)
    t.script(_SHARDS, SRC, str(args.shards), str(shard_mib), check=True, timeout=3600)
    t.script(_SMALL, SMALL, str(args.small_files), check=True, timeout=3600)
    cases = {"shards": SRC, "small": SMALL}
    times = {case: {"cp": [], "stage": [], "rerun": []} for case in cases}
    scratch = [f"/dev/shm/bench-{side}-{case}" for case in cases for side in ("cp", "stage")]
    try:
        t.run(["rm", "-rf", *scratch], check=True)
        timed(t, ["cp", "-r", SRC, scratch[0]])  # warm-up: first tmpfs allocation is slower
        t.run(["rm", "-rf", scratch[0]], check=True)
        # Alternate cp and staging, and the two folders, so that a noisy neighbour hits all alike.
        for _ in range(args.rounds):
            for case, src in cases.items():
                _round(t, src, case, times[case])
    finally:
        t.run(["rm", "-rf", *scratch])
        if session is not None:
            session.close()
    gib = args.shards * shard_mib / 1024
    print(f"target: {t.name}; medians of {args.rounds} alternating rounds; ratio = cp time / this time")
    labels = {"shards": f"{args.shards} shards, {gib:.2f} GiB", "small": f"{args.small_files} small files"}
    for case, label in labels.items():
        m = {k: statistics.median(v) for k, v in times[case].items()}
        rate = f"  {gib / m['stage']:6.2f} GiB/s (cp {gib / m['cp']:.2f})" if case == "shards" else ""
        print(f"{label}:")
        print(f"  plain cp -r          : {m['cp']:8.3f} s")
        print(f"  stage-weights.sh     : {m['stage']:8.3f} s  ratio {m['cp'] / m['stage']:6.2f}{rate}")
        print(f"  re-run (all staged)  : {m['rerun']:8.3f} s  ratio {m['cp'] / m['rerun']:6.2f}")


if __name__ == "__main__":
    main()
