"""A steady load through a router while a test changes what serves it (issue 39): gpunode's own bench
client (its paced mode) in a lab container, and the requests split into those that started during
the change and the others, with their failures and latency spread (gpunode/bench/steady.py)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from gpunode.bench import steady
from gpunode.bench.runner import Endpoint, Layout, client_text
from gpunode_lab import paths
from tests.lab.provision_helpers import CT_PATH, Attached, poll

STOP = "/tmp/gpunode-upgrade-lab.stop"
RATE, IN_FLIGHT = 4.0, 8  # a steady 4 requests a second, at most 8 open: bounded on the 2-core lab


class Load:
    """The bench client in paced mode, in the container `box`, through `url` until the stop file appears.
    `plan`: the resolver's plan of a target whose venv, model and tokenizer the container has."""

    def __init__(self, box: Attached, plan: dict[str, Any], url: str, key: str = ""):
        self.box = box
        lay = Layout([], None, plan["model"]["served_model_name"], plan["model"]["path"] + "/tokenizer.json",
                     plan["venv"] + "/bin/python", plan["engine"], plan["pinset"])
        request = steady.request(lay, Endpoint("router", url, key), rate=RATE, max_in_flight=IN_FLIGHT,
                                 stop_file=STOP)
        box.sh('rm -f "$1"', STOP)
        argv = ["lxc-attach", "-P", str(paths.LXC_PATH), "-n", str(box.vmid), "--clear-env", "--", "env",
                f"PATH={CT_PATH}", "HOME=/root", lay.python, "-c", client_text()]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request))  # the key with it, on stdin only
        self.proc.stdin.close()
        self.done, self.lines = 0, []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith("@@progress "):
                self.done = int(line.split()[1])

    def answered(self, n: int) -> None:
        """Wait until the client has n more answers than now (steady state before and after)."""
        goal = self.done + n
        poll(f"{n} more answers through the router", lambda: self.done >= goal or self.proc.poll() is not None, 120)
        assert self.proc.poll() is None, self.evidence()

    def evidence(self) -> str:
        return "".join(self.lines[-5:]) + (self.proc.stderr.read() if self.proc.stderr else "")

    def stop(self) -> dict[str, Any]:
        self.box.sh('touch "$1"', STOP)
        self.proc.wait(180)
        self.reader.join(10)
        line = next((x for x in self.lines if x.startswith("@@result ")), None)
        assert line is not None, self.evidence()
        return json.loads(line.split(" ", 1)[1])


def under_load(load: Callable[[], Load], name: str, action: Callable[[], Any],
               figures: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """action() while the load runs, after 20 answers of steady state and before 20 more: its result
    and the load's requests split into during and steady, printed and kept in `figures`."""
    running = load()
    try:
        running.answered(20)
        t0 = time.time()
        result = action()
        t1 = time.time()
        running.answered(20)
    finally:
        raw = running.stop()
    parts = steady.split(raw, [(t0, t1)])
    parts["seconds"] = round(t1 - t0, 1)
    figures[name] = parts
    print(f"\n{name} ({t1 - t0:.0f} s): " + steady.line("steady", parts["steady"]) + "; "
          + steady.line(f"during {name}", parts["during"]))
    return result, parts
