"""Run the benchmark on a target: one client process on the target per step, through the
target's own transport (SSH, then `pct exec` into a container).

Why on the target: the servers and the router listen on the container's loopback, which a
Proxmox host does not route to, and a port forward would measure the SSH link as well. The
client costs one core; on a GPU node that is noise, on the lab's 2-core box it is not (see
docs/bench.md).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from gpunode import __version__, listen
from gpunode.bench import stats
from gpunode.bench.schema import SCHEMA
from gpunode.errors import StepError, tail
from gpunode.resolve.plan import Plan
from gpunode.steps.progress import ProgressSink
from gpunode.transport.base import Transport

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class Endpoint:
    name: str
    url: str
    key: str = field(default="", repr=False)  # its API key: goes to the client on stdin, in no result


@dataclass
class Spec:
    """What one `inv bench` measures; `settings()` is what the results file records of it."""

    concurrency: list[int]
    input_len: int = 256
    output_len: int = 256
    requests: int | None = None       # per server and step; None: 4 x concurrency, at least 16
    prompts: list[dict[str, Any]] | None = None  # from --prompts FILE; None: random token ids
    prompts_name: str = "random"
    seed: int = 0
    temperature: float = 0.0
    ignore_eos: bool = True
    phases: tuple[str, ...] = ("servers", "router")
    timeout_s: int = 600

    def per_server(self, concurrency: int) -> int:
        return self.requests or max(16, 4 * concurrency)

    def settings(self) -> dict[str, Any]:
        return {"prompts": self.prompts_name, "input_len": None if self.prompts else self.input_len,
                "output_len": self.output_len, "concurrency": self.concurrency,
                "requests_per_server": self.requests or "4 x concurrency, at least 16", "seed": self.seed,
                "temperature": self.temperature, "ignore_eos": self.ignore_eos, "phases": list(self.phases)}


@dataclass
class Layout:
    """Where the plan put things: servers, router, model, the engine venv's Python."""

    servers: list[Endpoint]
    router: Endpoint | None
    model: str
    tokenizer: str
    python: str
    engine: str
    pinset: str
    notes: list[str] = field(default_factory=list)
    fleet_workers: int = 0  # > 0: `router` is a fleet router with that many servers behind it


def _host(args: tuple[str, ...]) -> str:
    """Where a server listens (its --host): a fleet member's on its fleet address, not loopback."""
    found = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--host"]
    return found[-1] if found else "127.0.0.1"


def layout(plan: Plan, key: str = "") -> Layout:
    """key: the servers' API key (server_api_key), which their router takes too (secretfiles)."""
    servers = [Endpoint(s.name, listen.url(_host(s.args), s.port), key) for s in plan.servers]
    router = Endpoint("router", f"http://127.0.0.1:{plan.router.port}", key) if plan.router else None
    return Layout(servers, router, plan.model.served_model_name, posixpath.join(plan.model.path, "tokenizer.json"),
                  posixpath.join(plan.venv, "bin", "python"), plan.engine, plan.pinset)


def client_text() -> str:
    return resources.files("gpunode.bench").joinpath("client.py").read_text()


def client_request(spec: Spec, lay: Layout, label: str, endpoints: list[tuple[Endpoint, int, int]]) -> dict[str, Any]:
    count = max(n for _, _, n in endpoints)
    prompts: Any = spec.prompts or {"tokenizer": lay.tokenizer, "seed": spec.seed, "count": min(count, 1024),
                                    "input_len": spec.input_len}
    return {"label": label, "prompts": prompts, "output_len": spec.output_len, "temperature": spec.temperature,
            "ignore_eos": spec.ignore_eos, "timeout_s": spec.timeout_s,
            "endpoints": [{"name": e.name, "url": e.url, "model": lay.model, "concurrency": c, "requests": n,
                           **({"api_key": e.key} if e.key else {})} for e, c, n in endpoints]}


def run_step(target: Transport, lay: Layout, request: dict[str, Any], progress: Progress | None) -> dict[str, Any]:
    sink = ProgressSink(progress)
    budget = request["timeout_s"] * (1 + sum(e["requests"] for e in request["endpoints"]) // 8) + 120
    result = target.run([lay.python, "-c", client_text()], stdin=json.dumps(request).encode(), sink=sink,  # type: ignore[arg-type]
                        timeout=budget)
    sink.flush()
    line = next((x for x in sink.lines if x.startswith("@@result ")), None)
    if not result.ok or line is None:
        raise StepError(f"the benchmark client ({request['label']}) failed with exit code {result.exit_code}",
                        target=target.name, evidence=tail("\n".join(sink.lines) + "\n" + result.stderr, 15),
                        hint=f"it runs as `{lay.python} -c ...` on the target: is the engine venv installed "
                        "(inv provision) and are the servers up (inv status)?")
    return json.loads(line.split(" ", 1)[1])


def summarize(raw: dict[str, Any], phase: str, concurrency: int, in_flight: int,
              urls: dict[str, str]) -> dict[str, Any]:
    endpoints = {name: {"url": urls[name], "summary": stats.endpoint_summary(recs), "records": recs}
                 for name, recs in raw["endpoints"].items()}
    return {"phase": phase, "concurrency": concurrency, "in_flight": in_flight, "wall_s": raw["wall_s"],
            "warmup_errors": raw["warmup_errors"], "total": stats.step_total(raw["endpoints"]),
            "endpoints": endpoints}


def steps(spec: Spec, lay: Layout) -> list[tuple[str, int, list[tuple[Endpoint, int, int]]]]:
    """(phase, concurrency, [(endpoint, concurrency, requests)]) in the order they run.

    Concurrency is per server: the router gets concurrency x servers in flight, so each
    server sees the same load in both phases and the two totals compare.
    """
    out = []
    n = len(lay.servers)
    for c in spec.concurrency:
        if lay.fleet_workers and lay.router is not None:
            # the same load per server as the servers and router phases: c x every server of the fleet
            out.append(("fleet", c, [(lay.router, c * lay.fleet_workers, spec.per_server(c) * lay.fleet_workers)]))
            continue
        if "servers" in spec.phases and lay.servers:
            out.append(("servers", c, [(s, c, spec.per_server(c)) for s in lay.servers]))
        if "router" in spec.phases and lay.router is not None:
            out.append(("router", c, [(lay.router, c * n, spec.per_server(c) * n)]))
    return out


def bench(target: Transport, plan: Plan, spec: Spec, progress: Progress | None = None,
          on_run: Callable[[dict[str, Any]], None] | None = None,
          fleet: tuple[str, int] | None = None, key: str = "", fleet_key: str = "") -> dict[str, Any]:
    """fleet: (the fleet router's URL as `target` reaches it, its number of workers): bench only
    through it, from `target` (a member: its engine venv runs the client, its model's tokenizer
    makes the prompts). key: the servers' API key; fleet_key: the fleet router's (clients') key."""
    lay = layout(plan, key)
    if fleet is not None:
        lay.router, lay.fleet_workers = Endpoint("fleet-router", fleet[0], fleet_key), fleet[1]
    runs = []
    client: dict[str, Any] = {}
    for phase, c, eps in steps(spec, lay):
        label = f"{phase} c={c}"
        raw = run_step(target, lay, client_request(spec, lay, label, eps), progress)
        client = {"name": "gpunode.bench.client (asyncio + aiohttp, streaming /v1/completions)",
                  "runs_on": "target", "python": lay.python, "python_version": raw["python"],
                  "aiohttp": raw["aiohttp"]}
        run = summarize(raw, phase, c, sum(x[1] for x in eps), {e.name: e.url for e, _, _ in eps})
        runs.append(run)
        if on_run:
            on_run(run)
    return {"schema": SCHEMA, "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "gpunode": __version__, "target": target.name, "engine": lay.engine, "pinset": lay.pinset,
            "model": lay.model, "client": client, "settings": spec.settings(), "runs": runs}
