"""What README's test command costs: wall clock, bytes downloaded, and the judge's share.

    .venv/bin/python bench/testrun_cost.py                       # README's test command (.venv/bin/pytest)
    .venv/bin/python bench/testrun_cost.py -- .ci/run            # CI's whole run (setup, lab up, tests)
    .venv/bin/python bench/testrun_cost.py -- .venv/bin/pytest tests/test_sglang_judge.py
    .venv/bin/python bench/testrun_cost.py --fresh-judge -- ...  # with an empty judge cache, as a new machine

Runs the command and prints its wall clock, the bytes the machine's network interfaces received
while it ran (loopback left out: on a machine running nothing else, what it downloaded), what the
caches grew by (the judge's environments, the kernel wheels, pip's and uv's), and per test file
(bench/testrun_plugin.py, loaded into every pytest the command starts) the seconds and bytes of
the judge (tests/test_sglang_judge.py), the lab tests (tests/lab/) and the ten slowest files.
--fresh-judge points GPUNODE_JUDGE_CACHE at an empty folder (removed afterwards): what a machine
without ~/.cache/gpunode/judge pays. --json FILE also writes the figures there.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.testrun_plugin import received  # noqa: E402

JUDGE_TEST = "tests/test_sglang_judge.py"
HOME = Path.home()


def size(path: Path) -> int:
    if not path.exists():
        return 0
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=False).stdout.split()
    return int(out[0]) if out else 0


def caches(judge: Path) -> dict[str, Path]:
    return {"judge environments": judge,
            "kernel wheels": Path(os.environ.get("GPUNODE_WHEEL_CACHE") or HOME / ".cache/gpunode/kernel-wheels"),
            "pip cache": HOME / ".cache/pip", "uv cache": Path(os.environ.get("UV_CACHE_DIR") or HOME / ".cache/uv")}


def gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fresh-judge", action="store_true", help="an empty judge cache, removed afterwards")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="after --: the command (default .venv/bin/pytest)")
    a = ap.parse_args()
    command = [c for c in a.command if c != "--"] or [str(REPO / ".venv/bin/pytest")]
    env = dict(os.environ)
    fresh = Path(tempfile.mkdtemp(prefix="judge-cache-")) if a.fresh_judge else None
    if fresh:
        env["GPUNODE_JUDGE_CACHE"] = str(fresh)
    judge = Path(env.get("GPUNODE_JUDGE_CACHE") or HOME / ".cache/gpunode/judge")
    folder = Path(tempfile.mkdtemp(prefix="testrun-"))
    env["GPUNODE_TESTRUN_DIR"] = str(folder)
    env["PYTEST_ADDOPTS"] = (env.get("PYTEST_ADDOPTS", "") + " -p bench.testrun_plugin").strip()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    before = {k: size(p) for k, p in caches(judge).items()}
    rx, started = received(), time.monotonic()
    rc = subprocess.run(command, cwd=REPO, env=env, check=False).returncode
    wall, got = time.monotonic() - started, received() - rx
    grown = {k: size(p) - before[k] for k, p in caches(judge).items()}
    files: dict[str, list[float]] = {}
    for part in folder.glob("*.json"):
        for f, (s, b, n) in json.loads(part.read_text()).items():
            e = files.setdefault(f, [0.0, 0, 0])
            e[0], e[1], e[2] = e[0] + s, e[1] + b, e[2] + n
    shutil.rmtree(folder, ignore_errors=True)
    if fresh:
        shutil.rmtree(fresh, ignore_errors=True)

    def share(pred) -> tuple[float, int, int]:
        rows = [v for f, v in files.items() if pred(f)]
        return sum(r[0] for r in rows), int(sum(r[1] for r in rows)), int(sum(r[2] for r in rows))

    judge_s, judge_b, judge_n = share(lambda f: f == JUDGE_TEST)
    lab_s, lab_b, lab_n = share(lambda f: f.startswith("tests/lab/"))
    figures = {"command": " ".join(command), "rc": rc, "wall_s": round(wall, 1), "received_bytes": got,
               "judge": {"seconds": round(judge_s, 1), "bytes": judge_b, "tests": judge_n},
               "lab": {"seconds": round(lab_s, 1), "bytes": lab_b, "tests": lab_n},
               "caches_grew_bytes": grown, "fresh_judge_cache": bool(fresh),
               "files": {f: [round(v[0], 1), int(v[1]), int(v[2])] for f, v in sorted(files.items())}}
    print(f"\ncommand: {figures['command']} (exit {rc})")
    print(f"wall clock: {wall:.0f} s ({wall / 60:.1f} min); received: {gb(got)} (the whole machine's, loopback "
          "left out)")
    print(f"judge ({JUDGE_TEST}): {judge_s:.0f} s, {gb(judge_b)}, {judge_n} tests")
    print(f"lab tests (tests/lab/, time summed over tests): {lab_s:.0f} s, {gb(lab_b)}, {lab_n} tests")
    print("caches grew: " + ", ".join(f"{k} {gb(v)}" for k, v in grown.items()))
    print("slowest test files:")
    for f, (s, b, n) in sorted(files.items(), key=lambda kv: -kv[1][0])[:10]:
        print(f"  {s:7.0f} s  {gb(b):>8}  {n:4d} tests  {f}")
    if a.json:
        Path(a.json).write_text(json.dumps(figures, indent=1) + "\n")
    return rc


if __name__ == "__main__":
    sys.exit(main())
