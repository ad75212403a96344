"""How long each command takes to start, as ratios from one run (issue 45).

    .venv/bin/python bench/startup.py                        # offline commands only
    .venv/bin/python bench/startup.py --before /tmp/before   # also the same commands from another checkout
    flock /tmp/gpunode-lab.lock .venv/bin/python bench/startup.py --before /tmp/before --lab

Each command runs as a whole process (the `gpunode` console script of this venv, bytecode written
by a first run that is not timed), alternating with `python -c pass` and, with --before, with the
same command from the other checkout (its src/ and lab/ first on PYTHONPATH, before this venv's
editable install): on this shared 2-core machine one process start moves between runs by more than
most changes do, so a figure timed apart from what it is divided by means little. Printed per
command: the median wall time, its ratio to `python -c pass`, and before/after. `--lab` adds a no-op
`provision` and a `status --sample 0` on lab container 200 (provisioned already; hold the lab lock), and
one bare `pct exec 200 -- true` through OpenSSH's client as a whole process, for scale.
The module counts come from one more run of each, with the modules it loaded printed at exit.
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
GPUNODE = Path(sys.executable).with_name("gpunode")
SMI = REPO / "tests/data/nvidia-smi/h100-x8/nvidia-smi.txt"
MODEL = REPO / "tests/data/models/gpt-oss-20b"
INVENTORY = REPO / "inventory"

#: what `status` imports before its round trip: its task body's modules, the variable registry it
#: checks the inventory against, the task tree (the whole status needs the lab: --lab)
STATUS_IMPORTS = ("from gpunode.cli.session import Session\n"
                  "from gpunode.fleet import gather, render, status\n"
                  "from gpunode.steps.secretfiles import curl_auth\n"
                  "from gpunode import variables\n"
                  "variables.registry()\n"
                  "import gpunode.cli.main\n")
OFFLINE = {
    "--help": ["--help"],
    "--list": ["--list"],
    "resolve (offline)": ["resolve", "--nvidia-smi", str(SMI), "--model", str(MODEL)],
    "status's imports": ["-c", STATUS_IMPORTS],
}
#: one bare round trip as a whole process, for scale: OpenSSH's client to the lab's sshd, `pct exec 200 -- true`
LAB_KEYS = Path("/var/lib/gpunode-lab/ssh")
BARE_TRIP = ["ssh", "-p", "2222", "-i", str(LAB_KEYS / "id_ed25519"),
             "-o", f"UserKnownHostsFile={LAB_KEYS / 'known_hosts'}", "-o", "BatchMode=yes",
             "root@127.0.0.1", "/var/lib/gpunode-lab/bin/pct", "exec", "200", "--", "true"]
LAB = {
    "bare pct exec (ssh)": BARE_TRIP,
    "provision no-op": ["provision", "--host", "lab", "--ct", "200", "-i", str(INVENTORY)],
    "status --sample 0": ["status", "--host", "lab", "--ct", "200", "--sample", "0", "-i", str(INVENTORY)],
}
AT_EXIT = ("import atexit, sys; atexit.register(lambda: print('MODULES', len(sys.modules), "
           "int('paramiko' in sys.modules), int('gpunode.resolve' in sys.modules), file=sys.stderr))\n")
CLI = "from gpunode.cli.main import main; sys.argv[0] = 'gpunode'; main()"


def env_for(tree: Path | None) -> dict[str, str]:
    env = dict(os.environ, NO_COLOR="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # timed as a user runs it: with bytecode (the untimed first run writes it)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree / "src"), str(tree / "lab")])
    return env


def command(tail: list[str]) -> list[str]:
    if tail[0] == "ssh":
        return tail
    return [sys.executable, *tail] if tail[0] == "-c" else [str(GPUNODE), *tail]


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, timeout=300, check=False)
    took = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.decode()[-400:]}")
    return took


def modules(args: list[str], env: dict[str, str]) -> tuple[int, bool, bool]:
    argv = [AT_EXIT + args[1]] if args[0] == "-c" else [AT_EXIT + CLI, *args]
    proc = subprocess.run([sys.executable, "-c", *argv], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=300, check=False)
    line = next(x for x in proc.stderr.splitlines() if x.startswith("MODULES"))
    _, n, ssh, resolver = line.split()
    return int(n), ssh == "1", resolver == "1"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, help="another checkout (e.g. `git worktree add /tmp/before main~1`)")
    ap.add_argument("--lab", action="store_true", help="also a no-op provision and status on lab/200")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--ct", type=int, default=200, help="the lab container of --lab (provisioned already)")
    ap.add_argument("--inventory", type=Path, default=INVENTORY, help="the inventory that has it")
    args = ap.parse_args()
    lab = {name: [str(args.ct) if word == "200" else str(args.inventory.resolve()) if word == str(INVENTORY) else word
                  for word in tail] for name, tail in LAB.items()}
    cases = {**OFFLINE, **(lab if args.lab else {})}
    trees: dict[str, Path | None] = {"after": None, **({"before": args.before.resolve()} if args.before else {})}
    bare = [sys.executable, "-c", "pass"]
    for name, tail in cases.items():
        mine = trees if tail[0] != "ssh" else {"after": None}  # the bare trip is no checkout's
        for tree in mine.values():  # writes the bytecode; not timed
            timed(command(tail), env_for(tree))
        samples: dict[str, list[float]] = {"pass": [], **{k: [] for k in mine}}
        for _ in range(args.repeat):
            samples["pass"].append(timed(bare, env_for(None)))
            for label, tree in mine.items():
                samples[label].append(timed(command(tail), env_for(tree)))
        base = statistics.median(samples["pass"])
        line = [f"{name:20s} python -c pass {base * 1000:5.0f} ms"]
        for label, tree in mine.items():
            took = statistics.median(samples[label])
            if tail[0] == "ssh":
                line.append(f"{took * 1000:5.0f} ms = {took / base:5.1f}x pass")
                continue
            count, ssh, resolver = modules(tail, env_for(tree))
            line.append(f"{label} {took * 1000:5.0f} ms = {took / base:5.1f}x pass, {count} modules"
                        f"{', SSH stack' if ssh else ''}{', resolver' if resolver else ''}")
        if "before" in mine:
            ratio = statistics.median(samples["before"]) / statistics.median(samples["after"])
            line.append(f"before/after {ratio:.2f}x")
        print(" | ".join(line), flush=True)


if __name__ == "__main__":
    main()
