"""Staging throughput vs plain `cp` of the same files into /dev/shm, from one run.

    python bench/staging.py                      # lab container 200, 2 GiB in 8 shards
    python bench/staging.py --local --gib 1      # this machine

Both copies read the same source (made once, then read once so both start
with it in the page cache) and write into /dev/shm on the same target; the
staging side runs the real stage-weights.sh (chunked, resumable, manifest).
The two alternate for --rounds rounds and the medians are compared, so that a
busy neighbour slows both alike. Prints both rates and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from importlib.resources import files
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from gpunode import inventory, roles  # noqa: E402
from gpunode.cli.session import Session  # noqa: E402
from gpunode.transport import LocalTransport  # noqa: E402

SRC = "/var/tmp/gpunode-bench/model"


def timed(t, argv) -> float:
    start = time.perf_counter()
    t.run(argv, check=True, timeout=3600)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--local", action="store_true", help="bench this machine instead of a lab container")
    ap.add_argument("--host", default="lab")
    ap.add_argument("--ct", type=int, default=200)
    ap.add_argument("--inventory", default="inventory")
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5, help="alternating cp/staging rounds; medians are compared")
    args = ap.parse_args()

    session = Session()
    if args.local:
        t = LocalTransport()
    else:
        inv = inventory.load(args.inventory)
        t = session.transport(inv.target(args.host, args.ct, defaults=roles.defaults()))
    shard_mib = int(args.gib * 1024 / args.shards)
    script = (files("gpunode") / "templates" / "weights" / "stage-weights.sh").read_text()
    t.write_file("/var/tmp/gpunode-bench/stage-weights.sh", script.encode(), mode=0o755)
    t.script('set -e; mkdir -p "$1"; i=0; while [ $i -lt "$2" ]; do f="$1/model-$i.safetensors"; '
             '[ -f "$f" ] || head -c $(($3 * 1048576)) /dev/urandom > "$f"; i=$((i+1)); done; cat "$1"/* > /dev/null',
             SRC, str(args.shards), str(shard_mib), check=True, timeout=3600)
    total = args.shards * shard_mib * 1048576
    cp_times, stage_times = [], []
    try:
        t.run(["rm", "-rf", "/dev/shm/bench-cp", "/dev/shm/bench-stage"], check=True)
        timed(t, ["cp", "-r", SRC, "/dev/shm/bench-cp"])  # warm-up: first tmpfs allocation is slower
        t.run(["rm", "-rf", "/dev/shm/bench-cp"], check=True)
        # Alternate the two so that a noisy neighbour hits both alike; compare medians.
        for _ in range(args.rounds):
            cp_times.append(timed(t, ["cp", "-r", SRC, "/dev/shm/bench-cp"]))
            t.run(["rm", "-rf", "/dev/shm/bench-cp"], check=True)
            stage_times.append(timed(t, ["sh", "/var/tmp/gpunode-bench/stage-weights.sh", SRC, "/dev/shm/bench-stage"]))
            noop_s = timed(t, ["sh", "/var/tmp/gpunode-bench/stage-weights.sh", SRC, "/dev/shm/bench-stage"])
            t.run(["rm", "-rf", "/dev/shm/bench-stage"], check=True)
    finally:
        t.run(["rm", "-rf", "/dev/shm/bench-cp", "/dev/shm/bench-stage"])
        session.close()
    cp_s, stage_s = statistics.median(cp_times), statistics.median(stage_times)
    gib = total / 2**30
    print(f"target: {t.name}; {args.shards} files, {gib:.2f} GiB; medians of {args.rounds} alternating rounds")
    print(f"plain cp -r        : {cp_s:7.2f} s  {gib / cp_s:6.2f} GiB/s")
    print(f"stage-weights.sh   : {stage_s:7.2f} s  {gib / stage_s:6.2f} GiB/s")
    print(f"re-run (all staged): {noop_s:7.2f} s")
    print(f"ratio staging/cp throughput: {cp_s / stage_s:.2f}")


if __name__ == "__main__":
    main()
