"""Servers answering: /health for every server (/readiness for the router), then one real
completion through each.

The wait runs on the target as one command (curl in a loop with a deadline),
so a long model load or JIT warm-up costs one round trip, not one per poll.
A unit that fails while we wait ends the wait at once, with its journal.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import ClassVar
from urllib.parse import urlsplit

from gpunode import shell
from gpunode.errors import StepError, tail
from gpunode.steps.base import Change, NoChange, Outcome, Probe, Step
from gpunode.steps.progress import Line, Progress, ProgressSink
from gpunode.transport.base import Transport


@dataclass(frozen=True)
class Endpoint:
    name: str          # "gpu0", "router"
    unit: str          # systemd unit serving it
    url: str           # "http://127.0.0.1:30001"
    model: str         # served model name for the completion request
    health: str = "/health"  # a router answers /health before it has workers: use /readiness


# The no-op's health probe: one HTTP/1.1 GET per endpoint through bash's /dev/tcp, printing
# curl's -w '%{http_code}' line for each ("000": refused, closed or silent for 3 s). curl
# costs ~8 ms to start in a container (libcurl, OpenSSL and their libraries); bash ~1 ms, and
# every run that changes nothing pays it. Without bash the same args go to curl.
# Every request is sent before any answer is read, so the servers answer side by side (each is
# its own process): 3 endpoints in container 200 took ~5 ms one after another, ~4 ms so.
# args: host port path ... -- curl argv.
_STATUS = shell.script("gpunode.steps", "health_status.sh")


# Every round polls each endpoint that is not ready yet and prints one `@@progress` line with
# every server's state ("cpu0 ready, cpu1 loading 40s"); args: grace, then name unit url path.
_WAIT = shell.script("gpunode.steps", "health_wait.sh")

# A router admits a worker only after its own health checks pass, so the first
# requests through it may get 503 for a few seconds: retry until the deadline.
_ASK = shell.script("gpunode.steps", "health_ask.sh")

# Answering a completion is not the same as having every worker: the router keeps a worker that
# failed its first health check out of rotation until a later check (seen in the lab right after
# a provision: /workers listed cpu0 only). Wait until /workers lists every server healthy; a
# router without /workers (nothing that looks like a worker list) is not waited for.
_ADMITTED = shell.script("gpunode.steps", "health_admitted.sh")


@dataclass
class Ready(Step):
    """Every endpoint answers /health with 200, then a real completion.

    + endpoints: servers first, router last
    + grace_s: how long model load and JIT may take (first boot of a node is slow)
    """

    changes_facts: ClassVar[bool] = False

    endpoints: list[Endpoint] = field(default_factory=list)
    grace_s: int = 1800
    ask_s: int = 120
    prompt: str = "The capital of France is"
    auth: str = field(default="", repr=False)  # curl config with the API key header (a secret)
    #: (done, total, per-server states) in servers while the wait runs; its output lines for -v
    on_progress: Progress | None = field(default=None, repr=False, compare=False)
    on_line: Line | None = field(default=None, repr=False, compare=False)

    @property
    def id(self) -> str:
        return "ready:" + ",".join(e.name for e in self.endpoints)

    def probe(self) -> list[str]:
        """One status line per endpoint, in endpoint order ("000": no answer): bash's /dev/tcp where
        every endpoint is plain http on this machine's loopback, else ONE curl for them all.
        --max-time holds for each transfer; each URL has its own -o (an -o goes with one URL)."""
        if not self.endpoints:
            return ["true"]
        urls = [x for e in self.endpoints for x in ("-o", "/dev/null", e.url + e.health)]
        curl = ["curl", "-s", "--max-time", "3", "-w", "%{http_code}\\n", *urls]
        asks = [_loopback(e) for e in self.endpoints]
        if any(a is None for a in asks):
            return curl
        return ["sh", "-c", _STATUS, "sh", *(x for a in asks if a for x in a), "--", *curl]

    def check(self, probe: Probe) -> Outcome:
        codes = [line for line in probe.lines() if re.fullmatch(r"[0-9]{3}", line)]
        if len(codes) != len(self.endpoints):
            codes = []  # cut short (curl missing, killed): no endpoint counts as answering
        down = [e for i, e in enumerate(self.endpoints) if i >= len(codes) or codes[i] != "200"]
        if not down:
            return NoChange(f"all {len(self.endpoints)} endpoints answer their health check with 200 "
                            f"({', '.join(e.name for e in self.endpoints)})")
        return Change(f"wait up to {self.grace_s}s for {', '.join(e.name for e in down)} to answer their health check, "
                      "then send one completion through each endpoint")

    def apply(self, target: Transport) -> None:
        quads = [x for e in self.endpoints for x in (e.name, e.unit, e.url, e.health)]
        sink = ProgressSink(self.on_progress, self.on_line)
        result = target.run(shell.sh(_WAIT, str(self.grace_s), *quads), sink=sink, timeout=self.grace_s + 60)
        sink.flush()
        if not result.ok:
            self._fail(target, sink.text + result.stderr, result.exit_code)
        for e in self.endpoints:
            body = json.dumps({"model": e.model, "prompt": self.prompt, "max_tokens": 8, "temperature": 0})
            r = target.run(shell.sh(_ASK, e.url, body, str(self.ask_s)), stdin=self.auth.encode(),
                           timeout=self.ask_s + 180)
            try:
                text = json.loads(r.stdout)["choices"][0]["text"]
            except (ValueError, KeyError, IndexError, TypeError):
                raise StepError(f"{e.name} ({e.url}) did not answer a completion request", target=target.name,
                                evidence=tail(r.stdout + r.stderr, 15),
                                hint=f"look at `journalctl -u {e.unit}` on the target") from None
            if not isinstance(text, str):
                raise StepError(f"{e.name} answered without text", target=target.name, evidence=r.stdout[-500:])
        self._router_admits(target)

    def _router_admits(self, target: Transport) -> None:
        router = next((e for e in self.endpoints if e.name == "router"), None)
        servers = [e.url for e in self.endpoints if e.name != "router"]
        if router is not None and servers:
            router_admits(target, router.url, servers, self.ask_s, self.auth)

    def _fail(self, target: Transport, out: str, code: int) -> None:
        unit = next((line.split(" ", 1)[1] for line in out.splitlines() if line.startswith(("@@failed", "@@timeout"))),
                    self.endpoints[0].unit if self.endpoints else "?")
        journal = target.run(["journalctl", "-u", unit, "-n", "30", "--no-pager", "-o", "cat"]).stdout
        state = target.run(["systemctl", "show", unit, "-p", "ActiveState,SubState,Result,NRestarts,ExecMainStatus"])
        why = "failed while starting" if code == 3 else f"did not answer its health check within {self.grace_s}s"
        raise StepError(f"{unit} {why}", target=target.name,
                        evidence=f"{state.stdout}{state.stderr}last journal lines:\n" + tail(journal, 30),
                        hint="fix the cause shown above, then re-run; raise ready_grace_s if the model "
                        "is just slow to load")


def _loopback(e: Endpoint) -> tuple[str, str, str] | None:
    """(host, port, path) of an http endpoint on 127.0.0.1 (what gpunode's units listen on); None
    for anything else: https, another host, a name ("localhost" may resolve to ::1 first, where curl
    would try the next address), a path that would need quoting in a request line."""
    url = urlsplit(e.url + e.health)
    try:
        port = url.port or 80
    except ValueError:
        return None
    if url.scheme != "http" or url.hostname != "127.0.0.1" or url.query or url.fragment:
        return None
    path = url.path or "/"
    return (url.hostname, str(port), path) if re.fullmatch(r"/[A-Za-z0-9._~/-]*", path) else None


def router_admits(target: Transport, router: str, servers: list[str], wait_s: int | float, auth: str = "") -> None:
    """Wait until the router at URL `router` lists every server url as a healthy worker (provision's
    readiness and inv start/restart share it); StepError naming the ones it keeps out."""
    r = target.run(shell.sh(_ADMITTED, router, str(int(wait_s)), *servers), stdin=auth.encode(),
                   timeout=wait_s + 60)
    if not r.ok:
        late = next((x.split()[1:] for x in r.stdout.splitlines() if x.startswith("@@unadmitted")), [])
        raise StepError(f"the router does not list {', '.join(late) or 'every server'} as a healthy worker "
                        f"after {int(wait_s)}s", target=target.name,
                        hint="the servers answer themselves; `inv logs --router` says why the router keeps them out")
