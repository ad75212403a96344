"""A no-op re-run against one `pct exec true` round trip, from one run (needs `inv lab.up`).

    .venv/bin/python bench/noop.py             # demo role and full provision on lab container 200
    .venv/bin/python bench/noop.py --demo-only

Everything goes through one SSH connection to the lab's sshd and the pct
stand-in, as a real run does. The demo role is applied first (so that the
timed run has nothing to do); the full provision is timed only when container
200 is already provisioned (`inv provision --host lab --ct 200`). Each figure is
the median of --repeat runs; the ratios say how many pct round trips a no-op
re-run costs (Ansible's tuned no-op re-run of a comparable play: 785 pct calls,
150 s, see the lab facts).
"""

from __future__ import annotations

import argparse
import statistics
import time

from gpunode import inventory, pipeline, roles
from gpunode.engine import run_target
from gpunode.roles.demo.role import role as demo_role
from gpunode.transport import PctTransport, SshSettings, SshTransport


def median_time(fn, repeat: int) -> tuple[float, object]:
    samples, last = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        last = fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inventory", default="inventory")
    ap.add_argument("--host", default="lab")
    ap.add_argument("--ct", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--demo-only", action="store_true")
    args = ap.parse_args()

    inv = inventory.load(args.inventory)
    target = inv.target(args.host, args.ct, defaults=roles.defaults())
    h = target.host
    ssh = SshTransport(SshSettings(name=h.name, address=h.address, port=h.port, user=h.user, key_file=h.key,
                                   host_key=h.host_key, known_hosts=h.known_hosts))
    ct = PctTransport(ssh, args.ct, pct=h.pct_path, host_name=h.name)
    try:
        ct.run(["true"], check=True)  # connect once; every figure below reuses this connection
        pct_s, _ = median_time(lambda: ct.run(["true"], check=True), max(args.repeat, 11))

        plan = [demo_role({})]
        first = run_target(ct, plan)
        if first.error or first.failed:
            raise SystemExit(f"demo role did not converge: {first.error}")
        demo_s, recap = median_time(lambda: run_target(ct, plan), args.repeat)
        rows = [("demo role no-op re-run", demo_s, recap)]

        if not args.demo_only:
            def full():
                job = pipeline.prepare(target, ct)
                return pipeline.provision([job], emit=lambda _: None)[0]

            probe = full()
            if probe.changed or probe.failed or probe.error:
                print(f"(provision of {target.name} is not converged: run `inv provision --host {args.host} "
                      f"--ct {args.ct}` first; skipping the full provision figure)")
            else:
                prov_s, recap = median_time(full, args.repeat)
                rows.append(("full provision no-op re-run (facts + all roles)", prov_s, recap))
    finally:
        ssh.close()

    print(f"target {ct.name}, over one SSH connection; medians of {args.repeat} runs")
    print(f"  one `pct exec {args.ct} -- true` round trip       {pct_s * 1000:8.1f} ms")
    for name, seconds, recap in rows:
        steps = recap.ok + recap.changed
        print(f"  {name:<46} {seconds * 1000:8.1f} ms  ({steps} steps, {recap.changed} changed, "
              f"{recap.round_trips} engine round trips)  ratio {seconds / pct_s:5.1f}x")


if __name__ == "__main__":
    main()
