"""Round-trip costs in the lab (needs `inv lab.up`): what one command through each layer costs.

    .venv/bin/python bench/lab_latency.py [-n 50]

Prints the median and p90 of: a new SSH connection (connect + auth + `true`), `true` over an
open connection, `pct exec 200 -- true` over an open connection (what PctTransport does, with
its `env -i`), and the pieces on the host without SSH (pct stand-in start-up, lxc-attach).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

from gpunode.transport import PctTransport, SshSettings, SshTransport
from gpunode_lab import paths


def settings() -> SshSettings:
    return SshSettings(name="lab", address=paths.SSH_ADDRESS, port=paths.SSH_PORT, user=paths.SSH_USER,
                       key_file=str(paths.CLIENT_KEY), known_hosts=(str(paths.KNOWN_HOSTS),))


def timed(fn, n: int) -> tuple[float, float]:
    fn()  # warm
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.9) - 1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=50)
    n = parser.parse_args().n

    def fresh() -> None:
        t = SshTransport(settings())
        t.run(["true"], check=True)
        t.close()

    host = SshTransport(settings())
    ct = PctTransport(host, paths.CT_CPU, pct=str(paths.PCT))
    pct = str(paths.PCT)
    lxc = ["lxc-attach", "-P", str(paths.LXC_PATH), "-n", str(paths.CT_CPU), "--keep-env", "--", "true"]
    rows = [
        ("new SSH connection + `true`", lambda: fresh()),
        ("`true` over the open connection", lambda: host.run(["true"], check=True)),
        ("`pct exec 200 -- true` over it", lambda: host.run([pct, "exec", "200", "--", "true"], check=True)),
        ("PctTransport.run(['true'])", lambda: ct.run(["true"], check=True)),
        ("host: pct status 200 (stand-in start-up)", lambda: subprocess.run([pct, "status", "200"], check=True,
                                                                            capture_output=True)),
        ("host: lxc-attach -- true", lambda: subprocess.run(lxc, check=True)),
        ("host: pct exec 200 -- true", lambda: subprocess.run([pct, "exec", "200", "--", "true"], check=True)),
    ]
    for label, fn in rows:
        med, p90 = timed(fn, n)
        print(f"{label:<44} median {med:6.1f} ms   p90 {p90:6.1f} ms")
    host.close()


if __name__ == "__main__":
    main()
