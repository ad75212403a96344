"""The venvs of the cold path, as ratios from one run: making a venv, and the router's venv.

    python bench/coldpath.py                 # lab container 200 (its wheelhouse, offline)
    python bench/coldpath.py --local --wheelhouse DIR   # this machine: python3 -m venv must work; uv from
                                                        # PATH or DIR's uv wheel; DIR holds the router lock's wheels

What a first provision pays for, each timed on the target by the commands gpunode runs:

- making a venv: the Venv step's first command with engine_installer pip, `python3 -m venv` (pip
  seeded into it: what every venv cost before), against the one with uv, `uv venv` (now);
- the router's venv end to end: the Venv step's own commands (create, write the lock's lines,
  `uv pip install --require-hashes --no-deps` of the router's lock, the import check, the
  manifest), with the venv made by `python3 -m venv` (before) and by `uv venv` (now), and with
  engine_installer pip (python3 -m venv, pip install) for reference; each command's time is
  printed for "now", so it says where the time goes;
- the tools venv (the base role's uv), from the wheelhouse: before, `python3 -m venv` (pip seeded) and
  `pip install uv` (installer pip); now, uv unpacked from its own wheel makes the venv and installs
  uv into it (Venv.uv_from_wheel, issue 45). `--tools-only` times only this.

The cases alternate for --rounds rounds and the medians are compared, so that a busy neighbour
slows all alike; ratio = before's time / this time (above 1: faster than before).

On the lab container, python3-venv (python3 -m venv's ensurepip) and uv are what the base role
would install: when ensurepip is missing, python3-venv is installed from the lab's apt repo and
purged again at the end (with the apt lists, when there were none); uv is unpacked from the
wheelhouse's uv wheel into the bench's own folder. Nothing else of the container is touched.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import bench_target  # noqa: E402  (beside this script)

from gpunode.resolve import (
    load,  # noqa: E402
    pylock,  # noqa: E402
)
from gpunode.steps.venv import Venv  # noqa: E402

WORK = "/var/tmp/gpunode-bench-coldpath"
PATH = f"{WORK}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# ensurepip present, else python3-venv from the target's apt (its lists fetched when there are none);
# prints what it installed, for the purge at the end.
_PREPARE = r"""set -e
mkdir -p "$1/bin"
if ! python3 -c 'import ensurepip' 2>/dev/null; then
  [ "$3" = 1 ] || { echo "python3 -m venv needs ensurepip here (python3-venv); install it first" >&2; exit 1; }
  lists=$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' | head -1)
  [ -n "$lists" ] || { apt-get update -qq >&2; echo "@@lists"; }
  dpkg-query -W -f='${Package}\n' | sort > "$1/dpkg.before"
  DEBIAN_FRONTEND=noninteractive apt-get install -qq -y --no-install-recommends python3-venv >&2
  dpkg-query -W -f='${Package}\n' | sort | comm -13 "$1/dpkg.before" - | sed 's/^/@@pkg /'
fi
if ! command -v uv >/dev/null; then
  whl=$(ls "$2"/uv-*.whl | head -1)
  python3 - "$whl" "$1/bin/uv" <<'EOF'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith("/scripts/uv"))
    with open(sys.argv[2], "wb") as out:
        out.write(z.read(name))
os.chmod(sys.argv[2], 0o755)
EOF
fi
echo "@@python $(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
echo "@@machine $(uname -m)"
"""


def timed(t, argv, stdin: bytes | None = None) -> float:
    start = time.perf_counter()
    t.run(["env", f"PATH={PATH}", *argv], stdin=stdin, check=True, timeout=600)
    return time.perf_counter() - start


def run_step(t, step: Venv, create: list[str] | None, parts: dict[str, list[float]] | None) -> float:
    """The step's commands from nothing, timed; `create` replaces its first one (the venv's making)."""
    t.run(["rm", "-rf", step.path], check=True)
    total = 0.0
    for i, cmd in enumerate(step.commands()):
        took = timed(t, create if (i == 0 and create) else list(cmd.argv), cmd.stdin)
        total += took
        if parts is not None:
            what = cmd.what.split(" (")[0].split(" `")[0]
            parts.setdefault("writing the lock's lines" if what.startswith("writing /") else what, []).append(took)
    return total


def cleanup(t, installed: list[str], prep: list[str], session) -> None:
    t.run(["rm", "-rf", WORK])
    if installed:
        t.run(["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "purge", "-qq", "-y", *installed])
    if "lists" in {line[2:] for line in prep}:
        t.run(["find", "/var/lib/apt/lists", "-maxdepth", "1", "-type", "f", "-delete"])
    if session is not None:
        session.close()


def tools_rows(t, args, facts: dict[str, str]) -> None:
    """The base role's tools venv made both ways, alternating; by the step's own commands (the
    before's uv on PATH is not used: installer pip never calls it)."""
    from gpunode import roles

    requirement = roles.defaults()["base_uv_requirement"]
    common = dict(path=f"{WORK}/tools", requirements=[requirement], no_index=True, find_links=[args.wheelhouse],
                  python="python3", verify=[["uv", "--version"]])
    steps = {"before: python3 -m venv + pip install": Venv(**common),
             "now: uv from its wheel (uv venv + uv pip)": Venv(**common, installer="uv", uv_from_wheel=True)}
    times: dict[str, list[float]] = {k: [] for k in steps}
    parts: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for name, step in steps.items():
            times[name].append(run_step(t, step, None, parts if name.startswith("now") else None))
    m = {k: statistics.median(v) for k, v in times.items()}
    before = m["before: python3 -m venv + pip install"]
    print(f"target: {t.name} (python {facts['python']}, {facts['machine']}); the tools venv ({requirement}, "
          f"wheelhouse {args.wheelhouse}); medians of {args.rounds} alternating rounds; ratio = before's time / "
          "this time; each way is 4 commands (4 round trips): make, install, verify, manifest")
    for name, took in m.items():
        print(f"  {name:<45}: {took:8.3f} s  ratio {before / took:6.2f}")
    print("  now, by command:")
    for what, took_all in parts.items():
        print(f"    {what:<43}: {statistics.median(took_all):8.3f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_target.add_arguments(ap)
    ap.add_argument("--wheelhouse", default="/mnt/lab/wheels/cpu", help="on the target; '' installs from PyPI")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds; medians are compared")
    ap.add_argument("--tools-only", action="store_true", help="only the tools venv (pip's vs uv from its wheel)")
    args = ap.parse_args()

    t, session = bench_target.open_target(args)
    prep = t.script(_PREPARE, WORK, args.wheelhouse, "0" if args.local else "1", check=True,
                    timeout=900).stdout.splitlines()
    facts = dict(line[2:].split(" ", 1) for line in prep if line.startswith("@@") and " " in line)
    installed = [line.split(" ", 1)[1] for line in prep if line.startswith("@@pkg ")]
    if args.tools_only:
        try:
            tools_rows(t, args, facts)
        finally:
            cleanup(t, installed, prep, session)
        return
    kb = load.load()
    lock = pylock.find(kb.pinset("router-sglang-router"), facts["machine"], facts["python"])
    if lock is None:
        sys.exit(f"no router lock for {facts['machine']} python{facts['python']}")
    package, module = kb.routers["sglang-router"].package, kb.routers["sglang-router"].module
    source = {"no_index": True, "find_links": [args.wheelhouse]} if args.wheelhouse else {}
    common = dict(requirements=[package], locked=lock.requirements(), lock=f"{lock.path.name}@{lock.digest}",
                  verify=[["python", "-c", f"import {module.split('.')[0]}"]], **source)
    router = f"{WORK}/router"
    uv_step = Venv(path=router, installer="uv", **common)
    pip_step = Venv(path=router, installer="pip", **common)
    pip_venv = ["python3", "-m", "venv", router]
    made = {"python3 -m venv": [], "uv venv": []}
    whole: dict[str, list[float]] = {"before": [], "now": [], "pip": []}
    parts: dict[str, list[float]] = {}
    try:
        for _ in range(args.rounds):
            for name, installer in (("python3 -m venv", "pip"), ("uv venv", "uv")):
                t.run(["rm", "-rf", f"{WORK}/v"], check=True)
                made[name].append(timed(t, list(Venv(path=f"{WORK}/v", installer=installer).commands()[0].argv)))
            whole["before"].append(run_step(t, uv_step, pip_venv, None))
            whole["now"].append(run_step(t, uv_step, None, parts))
            whole["pip"].append(run_step(t, pip_step, None, None))
    finally:
        cleanup(t, installed, prep, session)
    m = {k: statistics.median(v) for k, v in made.items()}
    w = {k: statistics.median(v) for k, v in whole.items()}
    print(f"target: {t.name} (python {facts['python']}, {facts['machine']}); medians of {args.rounds} "
          f"alternating rounds; ratio = before's time / this time")
    print("making a venv:")
    print(f"  python3 -m venv (pip seeded)     : {m['python3 -m venv']:8.3f} s")
    ratio = m["python3 -m venv"] / m["uv venv"]
    print(f"  uv venv                          : {m['uv venv']:8.3f} s  ratio {ratio:6.1f}")
    print(f"the router's venv ({package}, {len(lock.packages)} locked packages, "
          f"{'wheelhouse ' + args.wheelhouse if args.wheelhouse else 'PyPI'}):")
    print(f"  before: python3 -m venv, uv pip  : {w['before']:8.3f} s")
    print(f"  now: uv venv, uv pip             : {w['now']:8.3f} s  ratio {w['before'] / w['now']:6.2f}")
    print(f"  engine_installer pip             : {w['pip']:8.3f} s  ratio {w['before'] / w['pip']:6.2f}")
    print("  now, by command:")
    for what, times in parts.items():
        print(f"    {what:<30} : {statistics.median(times):8.3f} s")


if __name__ == "__main__":
    main()
