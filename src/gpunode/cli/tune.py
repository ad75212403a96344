"""inv tune: a server's launch flags chosen by measuring them where it runs (docs/tune.md)."""

from __future__ import annotations

import json as jsonlib
import sys
from datetime import UTC, datetime
from pathlib import Path

from invoke import Exit

from gpunode.cli.common import inventory_path, load_inventory, parse_int, parse_sets, select_targets, task

HELP = {
    "host": "inventory host", "ct": "container vmid on that host (omit for a plain SSH host)",
    "group": "tune for a group: the first target's first server is the test bed; the winner goes to group_vars",
    "server": "the server that is the test bed (default: the first; the others keep serving)",
    "concurrency": "requests in flight at once, as the job will run them (default 16)",
    "input_len": "the job's prompt length in tokens (default 256)",
    "output_len": "the job's reply length in tokens (default 256)",
    "prompts": "JSONL of the job's own prompts ({\"prompt\": ...[, \"max_tokens\": N]}) instead of random ones",
    "requests": "requests per candidate (default 4 x concurrency, at least 16)",
    "budget": "seconds the search may take, starts and benches together (default 1800); what does not fit "
              "is skipped",
    "margin": "percent a candidate must be faster by to replace the best so far; less is noise (default 3)",
    "knobs": "only these knobs of compat/tune.yml (comma-separated ids, e.g. max_num_seqs,kv_cache_bytes)",
    "out": "the candidate table (default ./gpunode-tune-TARGET-TIME.json; a .csv beside it)",
    "plot": "draw tok/s per candidate into this PNG (needs matplotlib: gpunode[plot])",
    "against": "with --plot: draw a saved table instead of tuning",
    "check": "show the candidates (each resolved and judged by the engine's own checks); start nothing",
    "apply": "write the winner into the inventory and provision the servers with it (--no-apply: write only)",
    "json": "print the table document on stdout", "inventory": "inventory folder or file",
    "set": "override a variable: -e key=value, or -e @vars.yml; repeatable",
    "limit": "only the targets matching this pattern (Ansible's)",
}


def _seconds(text: str) -> float:
    t = str(text).strip().lower()
    scale = 60 if t.endswith("m") else 3600 if t.endswith("h") else 1
    digits = t.rstrip("smh")
    return float(parse_int(digits, "--budget", 1, 7 * 86400, "seconds, or 10m / 1h")) * scale


@task(iterable=["set_"], help=HELP)
def tune(c, host=None, ct=None, group=None, server=None, concurrency="16", input_len=None, output_len=None,
         prompts=None, requests=None, budget="1800", margin="3", knobs=None, out=None, plot=None, against=None,
         check=False, apply=True, json=False, inventory=None, set_=None, limit=None):
    """Measure the flags a sourced rule says matter for this engine and model; write and apply the fastest."""
    from rich.console import Console

    from gpunode.tune import search

    console = Console(stderr=json)

    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False)

    if against is not None:
        doc = jsonlib.loads(Path(against).read_text(encoding="utf-8"))
        if not plot:
            raise Exit("--against draws a saved table: give --plot FILE.png too", code=2)
        say(search.plot(doc, Path(plot)) or f"plot: {plot}")
        return
    from gpunode import pipeline
    from gpunode.bench.inputs import prompt_file
    from gpunode.bench.runner import Spec
    from gpunode.cli.session import Session
    from gpunode.engine import lock
    from gpunode.engine.lock import Owner
    from gpunode.engine.runner import DEFAULT_STATE_DIR, new_run_id
    from gpunode.errors import GpunodeError
    from gpunode.resolve import resolve
    from gpunode.resolve.choices import from_vars
    from gpunode.resolve.plan import Plan
    from gpunode.tune import rules, write
    from gpunode.tune.bed import SystemdBed
    from gpunode.tune.check import engine_verdicts, refusal

    c_n = parse_int(concurrency, "--concurrency", 1, 4096, "e.g. --concurrency 16")
    spec = Spec(concurrency=[c_n], phases=("servers",))
    spec.input_len = parse_int(input_len or 256, "--input-len", 1, 1_000_000, "e.g. --input-len 256")
    spec.output_len = parse_int(output_len or 256, "--output-len", 1, 1_000_000, "e.g. --output-len 256")
    if requests is not None:
        spec.requests = parse_int(requests, "--requests", 1, 1_000_000, "e.g. --requests 64")
    if prompts:
        spec.prompts, spec.prompts_name = prompt_file(Path(prompts)), f"jsonl:{Path(prompts).name}"
    budget_s = _seconds(budget)
    margin_f = parse_int(margin, "--margin", 0, 100, "a whole percent, e.g. --margin 3") / 100
    inv = load_inventory(inventory)
    sets = parse_sets(set_)
    targets = select_targets(inv, host, ct, group, sets, limit)
    target = targets[0]
    owner = Owner.current(new_run_id())
    with Session() as session:
        transport = session.transport(target)
        job = pipeline.prepare(target, transport, only="servers")
        plan, facts = job.plan, job.facts
        model = rules.model_of(plan, facts)
        chosen = rules.choose(rules.load(), model, knobs)
        if not chosen:
            raise Exit(f"{target.name}: no rule in compat/tune.yml says a flag matters for {plan.engine} "
                       f"{plan.engine_version} and this model; nothing to tune", code=2)
        http = [s for s in plan.servers if s.serves_http]
        name = server or (http[0].name if http else "")
        if name not in {s.name for s in http}:
            raise Exit(f"{target.name}: no server {name!r} in the plan (servers: "
                       f"{', '.join(s.name for s in http) or 'none'})", code=2)
        variables = pipeline.target_vars(target)
        extra = from_vars(variables).extra_args

        def plan_for(overrides: dict) -> Plan:
            return resolve(facts, {**variables, **overrides})

        seen = [c for c in ("hybrid", "mtp_weights", "gpu") if getattr(model, c)]
        say(f"{target.name}: {plan.engine} {plan.engine_version} ({', '.join(seen) or 'no GPU'}); test bed "
            f"{name}, the others keep serving; knobs (compat/tune.yml):")
        for k in chosen:
            say(f"  {k.id} {list(k.values)}: {k.why} [{k.source}]")
        if check:
            shown: list[tuple[str, str, list[str], dict[str, str]]] = []
            for _, _, overrides in search.plan_candidates(chosen, c_n, extra):
                label = search.label(overrides)
                try:
                    p = plan_for(overrides)
                except GpunodeError as exc:  # a rule of gpunode's refuses it: shown as such
                    shown.append((label, f"refused by gpunode's rules: {exc.message}", [], {}))
                    continue
                s = next(x for x in p.servers if x.name == name)
                shown.append((label, "", list(s.args), p.server_env(s)))
            judged = iter(engine_verdicts(transport, plan.engine, plan.venv, [(a, e) for _, w, a, e in shown if not w]))
            for label, why, _, _ in shown:
                say(f"  {label}: {why or refusal(next(judged)) or 'the engine accepts it'}")
            say(f"--check: nothing was started; the search would take at most {budget_s:.0f} s")
            return
        servers_role = next(r for r in job.roles if r.name == "servers")
        roll = servers_role.handlers[f"restart:gpunode-{name}.service"]
        key = str(target.vars.get("server_api_key") or "")
        bed = SystemdBed(transport, plan, plan_for, name, roll, spec, key=key,  # type: ignore[arg-type]
                         grace_s=int(variables.get("servers_ready_grace_s") or 1800))
        with lock.acquire(transport, DEFAULT_STATE_DIR, owner):
            try:
                result = search.search(bed, chosen, concurrency=c_n, budget_s=budget_s, extra_args=extra, say=say,
                                       margin=margin_f)
            finally:
                bed.put_back()
        about = {"target": target.name, "test_bed": name, "engine": plan.engine, "engine_version": plan.engine_version,
                 "pinset": plan.pinset, "model": plan.model.served_model_name, "conditions": model.__dict__,
                 "gpus": [g.name for g in facts.gpus], "verdicts": bed.verdicts}
        shape = {"concurrency": c_n, "input_len": None if spec.prompts else spec.input_len,
                 "output_len": spec.output_len, "requests": spec.per_server(c_n), "prompts": spec.prompts_name}
        doc = search.document(result, chosen, about, shape)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        path = Path(out or f"gpunode-tune-{target.name.replace('/', '-')}-{stamp}.json")
        from gpunode import durable

        durable.write_atomic(path, (jsonlib.dumps(doc, indent=1, default=str) + "\n").encode())
        durable.write_atomic(path.with_suffix(".csv"), search.csv_text(doc).encode())
        for row in result.rows:
            figures = (f"{row.output_tok_s:.1f} tok/s, TTFT p50 {row.ttft_p50_ms} ms, ready in "
                       f"{row.start_to_ready_s} s, memory {row.memory_bytes}" if row.status == "measured"
                       else row.why[:160])
            mark = "*" if result.winner is not None and row.n == result.winner.n else " "
            say(f" {mark} #{row.n} {row.label}: {row.status}: {figures}")
        say(f"search {result.search_s:.0f} s of {budget_s:.0f} s"
            + (" (stopped by the budget)" if result.stopped_by_budget else "") + f"; table: {path} (and .csv)")
        if plot:
            say(search.plot(doc, Path(plot)) or f"plot: {plot}")
        if json:
            sys.stdout.write(jsonlib.dumps(doc, default=str) + "\n")
        win = result.winner
        if win is None:
            raise Exit("no candidate was measured without errors; the inventory is unchanged", code=1)
        if not win.overrides:
            say("the planned flags measured best: the inventory is unchanged")
            return
        written = write.winner(inventory_path(inventory), target.host.name if not group else None,
                               target.container.vmid if target.container and not group else None, group, win, doc)
        say(f"winner {win.label} written to {written}")
    if apply:
        from gpunode.cli.provision import provision

        provision(c, host=host, ct=ct, group=group, only="servers", inventory=inventory, set_=set_, limit=limit)


ns = tune
