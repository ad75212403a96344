"""inv bench: concurrent streamed completions to every server and through the router, on the
target; tok/s, TTFT and latency percentiles, errors; a results file, comparisons, a job's ETA."""

from __future__ import annotations

import json as jsonlib
import sys
from datetime import UTC, datetime
from pathlib import Path

from invoke import Exit

from gpunode import durable
from gpunode.cli.common import load_inventory, parse_int, parse_sets, select_targets, task

HELP = {
    "host": "inventory host", "ct": "container vmid on that host (omit for a plain SSH host)",
    "group": "bench every target of an inventory group, one after the other",
    "concurrency": "requests in flight per server; a list sweeps: 1,4,16,64 (default 16)",
    "input_len": "prompt length in tokens of the random prompts (default 256)",
    "output_len": "reply length in tokens; replies run to it (ignore_eos) (default 256)",
    "requests": "requests per server and step (default 4 x concurrency, at least 16)",
    "prompts": "JSONL of {\"prompt\": ...[, \"max_tokens\": N]} instead of random token ids",
    "seed": "seed of the random prompts (default 0)",
    "only": "servers or router: bench only that phase",
    "out": "results file (default ./gpunode-bench-TARGET-TIME.json)",
    "compare": "an earlier results file: print old -> new per server and concurrency",
    "against": "with --compare or --plot: use this results file instead of benching",
    "plot": "draw throughput vs concurrency into this PNG (needs matplotlib: gpunode[plot])",
    "job_samples": "the job's number of samples, for its ETA", "job_output_tokens": "output tokens per sample",
    "job": "the job's JSONL: its line count is the samples (and its max_tokens, where given)",
    "json": "print the results document on stdout", "inventory": "inventory folder or file",
    "set": "override a variable: -e key=value, or -e @vars.yml (a YAML file of them); repeatable",
    "limit": "only the targets matching this pattern (Ansible's): kpro*:!kpro6/202; hosts, host/vmid, groups",
    "fleet": "bench through the fleet router of these targets' fleet (docs/fleet.md), from its first member",
}


def _eta_inputs(job_samples, job_output_tokens, job):
    from gpunode.bench.inputs import BenchInputError, job_file

    if job is None and job_samples is None:
        if job_output_tokens is not None:
            raise BenchInputError("--job-output-tokens needs --job-samples N or --job FILE.jsonl",
                                  hint="e.g. --job-samples 902000 --job-output-tokens 1750")
        return None
    if job is not None and job_samples is not None:
        raise BenchInputError("give either --job FILE or --job-samples N, not both", hint="--job counts its lines")
    tokens = None
    if job_output_tokens is not None:
        tokens = parse_int(job_output_tokens, "--job-output-tokens", 1, 10_000_000, "e.g. --job-output-tokens 1750")
    if job is not None:
        samples, mean = job_file(Path(job))
        tokens = tokens or mean
        source = f"{job} ({samples} lines)"
    else:
        samples = parse_int(job_samples, "--job-samples", 1, 10**12, "e.g. --job-samples 902000")
        source = "--job-samples"
    if tokens is None:
        raise BenchInputError("the job's output tokens per sample are unknown",
                              hint="pass --job-output-tokens N (or give every --job line a max_tokens)")
    return samples, float(tokens), source


def _fleet_runs(inv, targets, sets, session) -> list:
    """--fleet: (the member whose engine venv runs the client, (the fleet router's URL, its workers, its
    clients' key)) per fleet."""
    from gpunode import pipeline
    from gpunode.bench.inputs import BenchInputError
    from gpunode.fleet import endpoint
    from gpunode.fleet import provision as fleetp

    every = fleetp.every_target(inv, sets)
    fleets = endpoint.fleets(every)
    names = sorted({str(t.vars.get("fleet_router") or "") for t in targets} - {""}
                   | {t.name for t in targets if t.name in fleets})
    if not names:
        raise BenchInputError("--fleet: none of these targets is in a fleet (no fleet_router names them)",
                              hint="set fleet_router: TARGET on the group (docs/fleet.md), or drop --fleet")
    out = []
    for name in names:
        members = [t for t in every if t.name in fleets[name].members and not t.vars.get("fleet_router_only")]
        workers = sum(len(pipeline.prepare(m, session.transport(m)).plan.servers) for m in members)
        router = fleetp.router_target(every, fleets[name], members[0])
        host, port = endpoint.router_listen(router)
        reach = endpoint.address_of(router) if host in endpoint.WILDCARD else host
        key = str(router.vars.get(endpoint.CLIENT_KEY) or "")
        out.append((members[0], (endpoint.local_url(reach, port), workers, key)))
    return out


def _save(path: str, doc: dict) -> None:
    durable.write_atomic(Path(path), (jsonlib.dumps(doc, indent=1) + "\n").encode())


@task(iterable=["set_"], help=HELP)
def bench(c, host=None, ct=None, group=None, concurrency="16", input_len=None, output_len=None, requests=None,
          prompts=None, seed=None, only=None, out=None, compare=None, against=None, plot=None, job_samples=None,
          job_output_tokens=None, job=None, json=False, inventory=None, set_=None, limit=None, fleet=False):
    """Serving benchmark: tok/s per server and total, TTFT/latency p50/p90/p99, errors; ETA of a job."""
    from rich.console import Console

    from gpunode.bench import eta, render, schema
    from gpunode.bench.inputs import BenchInputError, concurrencies, prompt_file
    from gpunode.bench.plot import plot as draw

    console = Console(stderr=json)
    job_eta = _eta_inputs(job_samples, job_output_tokens, job)
    old = schema.load(Path(compare)) if compare else None
    docs = []
    if against is not None:
        if host or group:
            raise BenchInputError("--against reads a saved result; it does not bench --host/--group",
                                  hint="drop --against to bench, or drop --host to read the file")
        docs.append(schema.load(Path(against)))
    else:
        from gpunode import pipeline
        from gpunode.bench.runner import Spec
        from gpunode.bench.runner import bench as run_bench
        from gpunode.cli.session import Session

        spec = Spec(concurrency=concurrencies(concurrency))
        spec.input_len = parse_int(input_len or 256, "--input-len", 1, 1_000_000, "e.g. --input-len 256")
        spec.output_len = parse_int(output_len or 256, "--output-len", 1, 1_000_000, "e.g. --output-len 256")
        if requests is not None:
            spec.requests = parse_int(requests, "--requests", 1, 1_000_000, "e.g. --requests 64")
        spec.seed = parse_int(seed or 0, "--seed", 0, 2**31, "e.g. --seed 0")
        if prompts:
            spec.prompts, spec.prompts_name = prompt_file(Path(prompts)), f"jsonl:{Path(prompts).name}"
        if only:
            if only not in ("servers", "router"):
                raise BenchInputError(f"--only {only[:40]!r} is not servers or router",
                                      hint="--only servers (each server directly) or --only router")
            spec.phases = (only,)
        inv = load_inventory(inventory)
        targets = select_targets(inv, host, ct, group, parse_sets(set_), limit)
        with Session() as session:
            runs = _fleet_runs(inv, targets, parse_sets(set_), session) if fleet else \
                [(t, None) for t in targets]
            for target, through in runs:
                transport = session.transport(target)
                plan = pipeline.prepare(target, transport).plan
                bar = render.StepBars(console)
                try:
                    doc = run_bench(transport, plan, spec, progress=bar, on_run=bar.done,
                                    fleet=through[:2] if through else None,
                                    key=str(target.vars.get("server_api_key") or ""),
                                    fleet_key=through[2] if through else "")
                finally:
                    bar.stop()
                stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
                name = target.name.replace("/", "-")
                if through is not None:
                    doc["fleet"] = {"router": through[0], "workers": through[1], "client_on": target.name}
                    name = "fleet-" + name
                path = out if out and len(targets) == 1 else f"gpunode-bench-{name}-{stamp}.json"
                _save(path, doc)  # at once: an ETA refused below must not lose the measurement
                doc["_saved"] = path
                docs.append(doc)
    for doc in docs:
        if job_eta:
            doc["eta"] = eta.estimate(doc["runs"], *job_eta[:2], doc["settings"].get("output_len"), job_eta[2])
        if old is not None:
            doc["compare"] = schema.compare(old, doc)
        saved = doc.pop("_saved", None)
        if saved and (job_eta or old is not None):
            _save(saved, doc)  # again, with its ETA and comparison
        if not json:
            render.results(console, doc)
            if old is not None:
                render.comparison(console, doc["compare"], compare)
        if plot:
            why = draw(doc, Path(plot))
            console.print(why or f"plot: {plot}", markup=False, highlight=False)
        if json:
            sys.stdout.write(jsonlib.dumps(doc) + "\n")
        elif saved:
            console.print(f"results: {saved}", markup=False, highlight=False)
    errors = sum(r["total"]["errors"] for d in docs for r in d["runs"])
    if errors:
        raise Exit(f"{errors} request(s) failed; see the errors above (results were saved)", code=1)


ns = bench
